"""An apt repository's signature: a key made for one build, in a temporary GnuPG home, that
clear-signs and detach-signs its ``Release`` files; only its public half outlives the build."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import ServeSystemError
from ..podman import require_tool, run_tool

#: the uid of the signing key (a made-up address: it signs nothing but a rehearsal repository)
KEY_UID = "serve-system rehearsal repository <rehearsal-repository@serve-system.invalid>"


class Signer:
    """A signing key made for one build, in a temporary GnuPG home (removed by :meth:`close`)."""

    def __init__(self) -> None:
        self.gpg = require_tool("gpg", "gnupg")
        # short path: gpg-agent's socket path must fit in a sockaddr_un
        self.home = Path(tempfile.mkdtemp(prefix="ssr-gpg-"))
        self.home.chmod(0o700)
        try:
            self._gpg("--quick-generate-key", KEY_UID, "ed25519", "sign", "never")
            self.public = self._gpg("--armor", "--export", KEY_UID).stdout
        except BaseException:
            self.close()
            raise
        if "BEGIN PGP PUBLIC KEY BLOCK" not in self.public:
            self.close()
            raise ServeSystemError("gpg made no public key for the rehearsal repository")

    def _gpg(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_tool([self.gpg, "--batch", "--quiet", "--homedir", str(self.home),
                     "--pinentry-mode", "loopback", "--passphrase", "", "--digest-algo", "SHA512", *args])

    def sign_release(self, release: Path) -> None:
        """``InRelease`` (clear-signed) and ``Release.gpg`` (detached) next to ``release``."""
        inrelease = release.with_name("InRelease")
        detached = release.with_name("Release.gpg")
        inrelease.unlink(missing_ok=True)
        detached.unlink(missing_ok=True)
        self._gpg("--local-user", KEY_UID, "--clearsign", "--output", str(inrelease), str(release))
        self._gpg("--local-user", KEY_UID, "--armor", "--detach-sign", "--output", str(detached),
                  str(release))

    def close(self) -> None:
        gpgconf = shutil.which("gpgconf")
        if gpgconf:
            subprocess.run([gpgconf, "--homedir", str(self.home), "--kill", "all"], capture_output=True,
                           check=False, timeout=30)
        shutil.rmtree(self.home, ignore_errors=True)
