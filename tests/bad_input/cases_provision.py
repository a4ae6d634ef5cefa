"""Bad inputs of the provisioning commands (lease, launch, status, rebuild, teardown, access).

Every case is refused before any network call or node is touched: the options are checked offline.
"""

from __future__ import annotations

import base64

from .corpus import BadInput

_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL0t2J3ImfGYoegNSFE3/tHIl7Zd7HDQEXbXS4gQcjLv a@class"
_ROSTER_HEAD = "student,ssh_public_key,email\n"
_INVENTORY = """all:
  children:
    serve_nodes:
      hosts:
        node-a:
          ansible_host: 127.0.0.1
          ansible_port: 2222
          ansible_user: cc
          ansible_ssh_private_key_file: /nonexistent/key
          serve_provider: chameleon
"""
_NO_CREDS = {"OS_APPLICATION_CREDENTIAL_ID": "", "OS_APPLICATION_CREDENTIAL_SECRET": "", "OS_USERNAME": "",
             "OS_PASSWORD": "", "OS_TOKEN": ""}


def _launch_roster(case_id: str, content: str | bytes, *expect: str) -> BadInput:
    return BadInput(case_id, ("serve-system", "launch", "--provider", "local", "--roster", "{tmp}/class.csv",
                              "-i", "{tmp}/hosts.yml"),
                    ("{tmp}/class.csv", *expect), files={"class.csv": content})


CASES: list[BadInput] = [
    # --- lease create: node lists, sites, counts, node types, times (all offline) -------------------
    BadInput("lease-exclude-empty-name",
             ("chi_scripts/lease.py", "create", "--exclude-node", "c11-13,,c12-01"),
             ("--exclude-node", "empty node name", "c11-13,c12-01")),
    BadInput("lease-exclude-space", ("chi_scripts/lease.py", "create", "--exclude-node", "c11-13 c12-01"),
             ("--exclude-node 'c11-13 c12-01'", "separate names with commas")),
    BadInput("lease-exclude-constraint-syntax",
             ("chi_scripts/lease.py", "create", "--exclude-node", "$node_name"),
             ("--exclude-node '$node_name'", "not a node name")),
    BadInput("lease-exclude-second-bad", ("chi_scripts/lease.py", "create", "--exclude-node", "c11-13",
                                          "--exclude-node", "c12-01;rm"),
             ("--exclude-node 'c12-01;rm'", "not a node name")),
    BadInput("lease-unknown-site", ("chi_scripts/lease.py", "create", "--site", "CHI@NOWHERE"),
             ("--site 'CHI@NOWHERE'", "CHI@TACC, CHI@UC")),
    BadInput("lease-site-lowercase", ("serve-system", "lease", "create", "--site", "chi@tacc"),
             ("--site 'chi@tacc'", "use one of CHI@TACC, CHI@UC")),
    BadInput("lease-show-unknown-site", ("serve-system", "lease", "show", "--site", "KVM@TACC"),
             ("--site 'KVM@TACC'", "CHI@TACC, CHI@UC"), env=_NO_CREDS),
    BadInput("lease-count-over-node-type", ("chi_scripts/lease.py", "create", "--count", "40"),
             ("--count 40", "at most 16 gpu_p100", "16 or fewer")),
    BadInput("lease-count-over-small-type",
             ("serve-system", "lease", "create", "--node-type", "gpu_a100_nvlink", "--count", "5"),
             ("--count 5", "at most 4 gpu_a100_nvlink")),
    BadInput("lease-unknown-node-type", ("serve-system", "lease", "create", "--node-type", "gpu_h100x"),
             ("--node-type 'gpu_h100x'", "use one of", "gpu_p100")),
    BadInput("lease-count-zero", ("chi_scripts/lease.py", "create", "--count", "0"),
             ("--count", "must be at least 1")),
    BadInput("lease-count-word", ("chi_scripts/lease.py", "create", "--count", "ten"),
             ("--count", "not a number: 'ten'")),
    BadInput("lease-duration-zero", ("chi_scripts/lease.py", "create", "--duration", "0m"),
             ("--duration", "duration must be positive")),
    BadInput("lease-duration-words", ("chi_scripts/lease.py", "create", "--duration", "three hours"),
             ("--duration", "not a duration like 2h50m")),
    BadInput("lease-start-past", ("chi_scripts/lease.py", "create", "--start", "2001-01-01 00:00"),
             ("--start 2001-01-01 00:00", "in the past")),
    BadInput("lease-end-before-start", ("chi_scripts/lease.py", "create", "--start", "2999-01-01 10:00",
                                        "--end", "2999-01-01 09:00"),
             ("end before it starts", "--start/--end/--duration")),
    BadInput("lease-start-and-align", ("chi_scripts/lease.py", "create", "--start", "2999-01-01 10:00",
                                       "--align-hour"),
             ("--start and --align-hour exclude each other",)),
    BadInput("lease-start-not-a-time", ("chi_scripts/lease.py", "create", "--start", "tomorrow"),
             ("--start", "not a UTC time like")),
    BadInput("lease-extend-by-zero", ("serve-system", "lease", "extend", "--by", "0m"),
             ("--by", "duration must be positive")),
    # a bare number once meant minutes silently: refused with the units to give
    BadInput("lease-duration-bare-number", ("chi_scripts/lease.py", "create", "--duration", "3"),
             ("--duration", "'3' has no unit", "give 3m for minutes, 3h for hours or 3s for seconds")),
    BadInput("lease-extend-by-bare-number", ("serve-system", "lease", "extend", "--by", "90"),
             ("--by", "'90' has no unit", "90m for minutes")),
    BadInput("launch-margin-bare-number", ("serve-system", "launch", "--provider", "local", "--margin", "30",
                                           "-i", "{tmp}/hosts.yml"),
             ("--margin", "'30' has no unit", "30m for minutes")),
    BadInput("lease-duration-seconds-after-minutes", ("chi_scripts/lease.py", "create", "--duration", "5s3m"),
             ("--duration", "not a duration like 2h50m, 170m or 90s")),
    BadInput("lease-extend-bad-inventory", ("serve-system", "lease", "extend", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml", "not valid YAML", "re-run launch"), files={"hosts.yml": "all: [\n"},
             env=_NO_CREDS),
    BadInput("lease-no-action", ("chi_scripts/lease.py",), ("required: ACTION",)),
    # --- launch: roster files, names, numbers ------------------------------------------------------
    _launch_roster("roster-header-missing", "alice," + _KEY + "\n", "first line must be the header"),
    _launch_roster("roster-unknown-column", "student,ssh_public_key,phone\nalice," + _KEY + ",1\n",
                   "unknown column 'phone'"),
    _launch_roster("roster-duplicate-student", _ROSTER_HEAD + f"alice,{_KEY},a@x\nalice,{_KEY},b@x\n",
                   "row 3, student 'alice' is already on row 2"),
    _launch_roster("roster-uppercase-student", _ROSTER_HEAD + f"Alice,{_KEY},a@x\n",
                   "row 2, student 'Alice'", "lowercase letters"),
    _launch_roster("roster-student-with-dash", _ROSTER_HEAD + f"al-ice,{_KEY},a@x\n", "student 'al-ice'"),
    _launch_roster("roster-private-key-pasted",
                   _ROSTER_HEAD + "alice,-----BEGIN OPENSSH PRIVATE KEY-----,a@x\n",
                   "row 2, ssh_public_key", "not an OpenSSH public key"),
    _launch_roster("roster-key-damaged", _ROSTER_HEAD + "alice,ssh-ed25519 AAAAC3Nza!!,a@x\n",
                   "row 2, ssh_public_key", "base64 part is damaged"),
    _launch_roster("roster-key-wrong-type", _ROSTER_HEAD + "alice,ssh-rsa " + _KEY.split()[1] + ",a@x\n",
                   "does not match its type ssh-rsa"),
    _launch_roster("roster-short-row", _ROSTER_HEAD + "alice\n", "row 2 has 1 fields"),
    # every bad row at once, in one line: one round of fixes, not one per row
    _launch_roster("roster-every-bad-row",
                   _ROSTER_HEAD + f"Alice,{_KEY},a@x\nbob,ssh-ed25519 AAAAC3Nza!!,b@x\n"
                   f"carol,{_KEY},c@x\ndave\n",
                   "3 bad rows, each to fix", "row 2, student 'Alice'", "row 3, ssh_public_key",
                   "row 5 has 1 fields"),
    _launch_roster("roster-empty", _ROSTER_HEAD, "no students"),
    _launch_roster("roster-not-utf8", b"student,ssh_public_key\n\xff\xfe" + b"alice\n", "not UTF-8"),
    BadInput("roster-missing-file",
             ("serve-system", "launch", "--provider", "local", "--roster", "{tmp}/nope.csv"),
             ("--roster {tmp}/nope.csv", "file not found", "student,ssh_public_key")),
    BadInput("launch-count-and-roster", ("serve-system", "launch", "--count", "2", "--roster", "{tmp}/c.csv"),
             ("--roster", "not allowed with argument --count")),
    BadInput("launch-bad-prefix", ("chi_scripts/launch.py", "--prefix", "my class!"),
             ("--prefix", "'my class!' is not a node-name prefix")),
    BadInput("launch-unknown-site", ("chi_scripts/launch.py", "--site", "CHI@Mars"),
             ("--site 'CHI@Mars'", "CHI@TACC, CHI@UC"), env=_NO_CREDS),
    BadInput("launch-poll-infinite", ("chi_scripts/launch.py", "--poll", "inf"),
             ("--poll", "finite number of seconds")),
    BadInput("launch-ssh-port-zero", ("serve-system", "launch", "--ssh-port", "0"),
             ("--ssh-port", "at least 1")),
    BadInput("launch-unknown-provider", ("serve-system", "launch", "--provider", "aws"),
             ("--provider", "invalid choice: 'aws'")),
    # --- status, rebuild, teardown, access --------------------------------------------------------
    BadInput("status-watch-negative", ("serve-system", "status", "--watch", "-5"),
             ("--watch", "must be a finite number of seconds >= 0")),
    BadInput("status-unknown-site", ("chi_scripts/status.py", "--site", "CHI@NOWHERE"),
             ("--site 'CHI@NOWHERE'", "use one of"), env=_NO_CREDS),
    BadInput("rebuild-nothing-named", ("serve-system", "rebuild", "-i", "{tmp}/hosts.yml"),
             ("NODE", "--all"), files={"hosts.yml": _INVENTORY}),
    BadInput("rebuild-unknown-node", ("serve-system", "rebuild", "node-b", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml", "no node named node-b", "known: node-a"), files={"hosts.yml": _INVENTORY}),
    BadInput("rebuild-wrong-provider", ("serve-system", "rebuild", "--all", "--provider", "local",
                                        "-i", "{tmp}/hosts.yml"),
             ("node-a", "--provider chameleon"), files={"hosts.yml": _INVENTORY}),
    BadInput("rebuild-missing-inventory", ("serve-system", "rebuild", "--all", "-i", "{tmp}/none.yml"),
             ("{tmp}/none.yml", "inventory not found", "run chi_scripts/launch.py first")),
    # every command that reads an inventory says to launch first when there is none yet
    BadInput("access-missing-inventory", ("serve-system", "access", "-i", "{tmp}/hosts.yml", "--out",
                                          "{tmp}/sheets"),
             ("{tmp}/hosts.yml: inventory not found; run chi_scripts/launch.py first",)),
    BadInput("inventory-missing-inventory", ("serve-system", "inventory", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml: inventory not found; run chi_scripts/launch.py first", "-i PATH")),
    BadInput("rebuild-inventory-no-group", ("serve-system", "rebuild", "--all", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml", "no 'serve_nodes' group"), files={"hosts.yml": "all: {}\n"}),
    BadInput("rebuild-inventory-binary", ("serve-system", "rebuild", "--all", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml", "not UTF-8"), files={"hosts.yml": b"\xff\xfe\x00all"}),
    BadInput("teardown-bad-prefix", ("chi_scripts/teardown.py", "--prefix", "../etc"),
             ("--prefix", "not a node-name prefix")),
    BadInput("access-no-students",
             ("serve-system", "access", "-i", "{tmp}/hosts.yml", "--out", "{tmp}/sheets"),
             ("no student nodes", "--roster"), files={"hosts.yml": _INVENTORY}),
    BadInput("access-out-is-a-file",
             ("serve-system", "access", "-i", "{tmp}/hosts.yml", "--out", "{tmp}/hosts.yml"),
             ("--out {tmp}/hosts.yml", "not a folder"), files={"hosts.yml": _INVENTORY}),
    BadInput("access-out-under-results", ("serve-system", "access", "-i", "{tmp}/hosts.yml",
                                          "--out", "{repo}/results/sheets"),
             ("--out", "never go under results/"), files={"hosts.yml": _INVENTORY}),
    BadInput("access-no-out", ("serve-system", "access"), ("--out",)),
]

# issue 26: every input file is checked, naming it, before credentials are read or the network touched
_BODY = _KEY.split()[1]
_KEY2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHnJ0Xg0Fv7Xn2b1bWq0oZ5c8hJ9vG2kQdRrLx8YtZ3s b@class"


def _chi_roster(case_id: str, content: str | bytes, *expect: str, extra: tuple[str, ...] = (),
                files: dict[str, str | bytes] | None = None) -> BadInput:
    """A Chameleon launch with no credentials at all: the roster's problem must be the line."""
    return BadInput(case_id, ("serve-system", "launch", "--roster", "{tmp}/class.csv", "-i",
                              "{tmp}/hosts.yml", *extra),
                    ("{tmp}/class.csv", *expect), files={"class.csv": content, **(files or {})},
                    env=_NO_CREDS)


def _openrc(case_id: str, content: bytes, *expect: str) -> BadInput:
    return BadInput(case_id, ("serve-system", "lease", "show", "--openrc", "{tmp}/openrc.sh"),
                    ("--openrc {tmp}/openrc.sh", *expect), files={"openrc.sh": content}, env=_NO_CREDS)


CASES += [
    _chi_roster("roster-shared-key", _ROSTER_HEAD + f"alice,{_KEY},a@x\nbob,{_KEY2},b@x\ncarol,{_KEY},c@x\n",
                "row 4, ssh_public_key: the same key as student 'alice' (row 2)",
                "each student sends their own"),
    _chi_roster("roster-shared-key-other-comment",
                _ROSTER_HEAD + f"alice,{_KEY},a@x\nbob,ssh-ed25519 {_BODY} bob@laptop,b@x\n",
                "row 3, ssh_public_key: the same key as student 'alice'"),
    _chi_roster("roster-key-truncated", _ROSTER_HEAD + f"alice,ssh-ed25519 {_BODY[:-8]} a@class,a@x\n",
                "row 2, ssh_public_key: the key is cut short", "ask the student for their .pub file again"),
    _chi_roster("roster-key-trailing-bytes", _ROSTER_HEAD + "alice,ssh-ed25519 "
                + base64.b64encode(base64.b64decode(_BODY) + b"xyz").decode() + ",a@x\n",
                "row 2, ssh_public_key: ", "not a whole ssh-ed25519 key"),
    _chi_roster("roster-key-short-ed25519",
                _ROSTER_HEAD + "alice,ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAEEFBQUFBQUFBQUFBQUFBQUE=,a@x\n",
                "row 2, ssh_public_key: an ed25519 key is 32 bytes, this one 16"),
    _chi_roster("roster-before-openrc", _ROSTER_HEAD + f"alice,{_KEY},a@x\nbob,{_KEY},b@x\n",
                "row 3, ssh_public_key: the same key", extra=("--openrc", "{tmp}/openrc.sh"),
                files={"openrc.sh": b"export OS_PROJECT_NAME=caf\xe9\n"}),
    _openrc("openrc-latin1-value", b"# Chameleon\nexport OS_AUTH_URL=https://x:5000/v3\n"
                                   b"export OS_PROJECT_NAME=caf\xe9\n",
            "line 3 (OS_PROJECT_NAME): its value is not UTF-8 text", "save the file as UTF-8"),
    _openrc("openrc-utf16-no-bom", "export OS_APPLICATION_CREDENTIAL_ID=abc\n".encode("utf-16-le"),
            "holds NUL bytes without a byte order mark", "save the file as UTF-8"),
    _openrc("openrc-utf16-bom-read", "export OS_APPLICATION_CREDENTIAL_ID=abc\n".encode("utf-16"),
            "missing OpenStack credentials: OS_APPLICATION_CREDENTIAL_SECRET"),
    _openrc("openrc-latin1-comment-read", b"# projet \xe9t\xe9\nexport OS_APPLICATION_CREDENTIAL_SECRET=s\n",
            "missing OpenStack credentials: OS_APPLICATION_CREDENTIAL_ID"),
    _openrc("openrc-control-character", b"export OS_APPLICATION_CREDENTIAL_ID='a\x1b[2Jb'\n",
            "line 1 (OS_APPLICATION_CREDENTIAL_ID): a control character in the value"),
    _openrc("openrc-bad-bom", b"\xff\xfeexport\n", "starts with a UTF-16 byte order mark but byte 8"),
    BadInput("openrc-folder", ("serve-system", "lease", "show", "--openrc", "{tmp}/rc"),
             ("--openrc {tmp}/rc: is a folder",), files={"rc/x": "x"}, env=_NO_CREDS),
    BadInput("status-bad-inventory-before-credentials", ("serve-system", "status", "-i", "{tmp}/hosts.yml"),
             ("{tmp}/hosts.yml", "not valid YAML"), files={"hosts.yml": "all: [\n"}, env=_NO_CREDS),
]
