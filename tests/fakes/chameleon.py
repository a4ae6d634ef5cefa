"""A small, stateful fake of a Chameleon site, served at the HTTP level through requests-mock.

The real python-chi, python-blazarclient, python-novaclient, python-neutronclient,
python-glanceclient, openstacksdk and keystoneauth code runs unchanged against it: requests-mock
replaces the transport of every ``requests`` session, so no packet leaves the process and nothing
can reach the real Chameleon.

What it serves (enough for the calls serve_system.provision.chameleon makes through python-chi):

* the resource API's ``sites.json`` (``CHI_RESOURCE_API_URL``),
* Keystone v3 ``POST /v3/auth/tokens`` (password, application credential, token) with a catalog,
* Blazar ``/v1/leases`` (list, get, create, update, delete) with scripted status sequences and refusals,
* Nova ``/v2.1`` (version document with microversions, servers, the rebuild action, flavors, keypairs),
* Neutron ``/v2.0`` (networks, ports, floating IPs, with quota and port checks),
* Glance ``/v2/images``.

And what the real site does over time, as the OpenStack API references describe it:

* Nova deletes a server asynchronously: after ``DELETE`` it stays listed, its status unchanged and
  ``OS-EXT-STS:task_state: "deleting"``, for :attr:`FakeChameleon.delete_polls` further Nova
  requests (bare metal: minutes); then it and its ports are gone and a floating IP that was still
  attached stays allocated to the project, unbound.
* A new server is ``BUILD`` (task states ``scheduling``, ``spawning``) for
  :attr:`FakeChameleon.build_polls` reads of it (a bare-metal deploy: about ten minutes).
* Nova's listing is paginated: at most ``limit`` (at most :attr:`FakeChameleon.nova_page_size`,
  Nova's ``max_limit``) servers per page, newest first, ``marker`` to go on, and a ``servers_links``
  ``next`` link when a page is full. A class shares its project with other users' servers.
* Neutron refuses an association with its own error body (:attr:`FakeChameleon.association_error`,
  e.g. 404 ``ExternalGatewayForFloatingIPNotFound``); Blazar answers an unsatisfiable lease with HTTP
  500 ``NotEnoughHostsAvailable`` (:attr:`FakeChameleon.blazar_refusal_status`).

Two sites with their own state (a class over CHI@TACC and CHI@UC): one :class:`FakeChameleon` per
site, each with :attr:`FakeChameleon.site` set, installed on the same mocker (:func:`install_sites`):
each answers its own site's hosts only (and the resource API), so leases, servers and floating IPs of
one site are never seen at the other, and each site's Keystone accepts only its own application
credential when :attr:`FakeChameleon.credential_id` is set (Keystone is per site).

Every request is logged in :attr:`FakeChameleon.log` as ``(METHOD, path)`` so tests can assert,
for instance, that a dry run makes no write call.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import uuid
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import requests_mock

RESOURCE_API = "http://resources.chi.fake"
SITES = {
    "CHI@TACC": "https://chi.tacc.fake",
    "CHI@UC": "https://chi.uc.fake",
}
PROJECT_ID = "p" * 32
USER_ID = "u" * 32
NOVA_VERSION = "2.61"
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _blazar_time(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f")


@dataclass
class FakeChameleon:
    """The state of one fake Chameleon project: at every site, or at :attr:`site` only (two fakes)."""

    images: list[str] = field(default_factory=lambda: ["CC-Ubuntu24.04-CUDA", "CC-Ubuntu22.04"])
    keypairs: list[str] = field(default_factory=lambda: ["mykey"])
    #: floating IP addresses the public network can still hand out, in order
    fip_pool: list[str] = field(default_factory=lambda: ["127.0.0.1"])
    #: status a new server gets (per server name, else ``default_server_status``)
    server_status: dict[str, str] = field(default_factory=dict)
    default_server_status: str = "ACTIVE"
    #: when set, lease creation is refused by Blazar with this message (HTTP 400)
    blazar_refusal: str | None = None
    #: statuses a lease shows on successive GETs of /v1/leases/ID, per lease name (the last sticks)
    lease_status_script: dict[str, list[str]] = field(default_factory=dict)
    #: refuse to authenticate (HTTP 401)
    reject_auth: bool = False
    #: when set, Nova refuses new servers with this (status, message), e.g. a quota error
    server_create_error: tuple[int, str] | None = None
    #: when True, Neutron refuses to attach any floating IP to a port (HTTP 400)
    refuse_association: bool = False
    #: when set, Neutron refuses to attach any floating IP with this (HTTP status, type, message)
    association_error: tuple[int, str, str] | None = None
    #: HTTP status of Blazar's refusal (Blazar sends 500 for "Not enough hosts available")
    blazar_refusal_status: int = 400
    #: Nova requests a deleted server stays listed with task_state "deleting" (0: gone at once)
    delete_polls: int = 0
    #: reads of a new server during which it is BUILD before it shows its status (0: at once)
    build_polls: int = 0
    #: Nova's max_limit: servers per page of a listing
    nova_page_size: int = 1000
    #: the one site this fake serves (None: every site's hosts, one shared state)
    site: str | None = None
    #: when set, Keystone refuses an application credential with another id (HTTP 401)
    credential_id: str | None = None

    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    ports: dict[str, dict[str, Any]] = field(default_factory=dict)
    floatingips: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[tuple[str, str]] = field(default_factory=list)
    auth_bodies: list[dict[str, Any]] = field(default_factory=list)
    lease_create_bodies: list[dict[str, Any]] = field(default_factory=list)
    server_create_bodies: list[dict[str, Any]] = field(default_factory=list)
    lease_update_bodies: list[dict[str, Any]] = field(default_factory=list)
    #: (server id, body) of every server action (rebuild, ...)
    server_actions: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: server id -> Nova requests left until its delete is done
    deleting: dict[str, int] = field(default_factory=dict)
    #: server id -> [reads left in BUILD, the status it gets then]
    building: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.networks = {
            "net-shared": {"id": "net-shared", "name": "sharednet1", "router:external": False,
                           "status": "ACTIVE", "subnets": ["sub-shared"], "shared": True,
                           "project_id": "admin", "tenant_id": "admin"},
            "net-public": {"id": "net-public", "name": "public", "router:external": True,
                           "status": "ACTIVE", "subnets": ["sub-public"], "shared": False,
                           "project_id": "admin", "tenant_id": "admin"},
        }
        self._ids = itertools.count(1)
        self._fixed = itertools.count(10)

    # --- helpers for tests ----------------------------------------------------------------------

    def writes(self) -> list[tuple[str, str]]:
        """The write calls (POST/PUT/PATCH/DELETE) made to OpenStack services (auth excluded)."""
        return [(m, p) for m, p in self.log if m in WRITE_METHODS and not p.endswith("/auth/tokens")]

    def add_lease(self, name: str, status: str = "ACTIVE", *, start: datetime | None = None,
                  hours: float = 2.83, node_type: str = "gpu_p100") -> dict[str, Any]:
        start = start or (_now() - timedelta(minutes=5))
        lease_id = str(uuid.uuid4())
        lease = {
            "id": lease_id, "name": name, "status": status, "user_id": USER_ID,
            "project_id": PROJECT_ID, "created_at": _now().strftime("%Y-%m-%d %H:%M:%S"),
            "updated_at": None, "start_date": _blazar_time(start),
            "end_date": _blazar_time(start + timedelta(hours=hours)), "trust_id": "t",
            "degraded": False, "events": [],
            "reservations": [{
                "id": str(uuid.uuid4()), "lease_id": lease_id, "resource_type": "physical:host",
                "status": "active" if status == "ACTIVE" else "pending", "min": 1, "max": 1,
                "resource_properties": json.dumps(["==", "$node_type", node_type]),
                "hypervisor_properties": "", "resource_id": "r",
            }],
        }
        self.leases[lease_id] = lease
        return lease

    def dump(self, path: Path) -> None:
        """Write the whole state as JSON (a command run in another process: tests/unit/chi_command.py)."""
        path.write_text(json.dumps({f.name: getattr(self, f.name) for f in fields(self)}))

    @classmethod
    def load(cls, path: Path) -> FakeChameleon:
        data = json.loads(path.read_text())
        fake = cls(**data)
        fake.log = [tuple(x) for x in fake.log]  # type: ignore[misc]
        return fake

    def add_server(self, name: str, *, status: str = "ACTIVE", floating_ip: str | None = None,
                   reservation: str = "r", user_id: str = USER_ID) -> dict[str, Any]:
        """A server on sharednet1 (with a port), as if created earlier; ``floating_ip`` attached."""
        sid = str(uuid.uuid4())
        self.servers[sid] = {
            "id": sid, "name": name, "status": status, "key_name": "mykey",
            "image": {"id": "img-0", "links": []},
            "flavor": {"original_name": "baremetal", "vcpus": 1, "ram": 1, "disk": 1,
                       "ephemeral": 0, "swap": 0, "extra_specs": {}},
            "created": _now().strftime("%Y-%m-%dT%H:%M:%SZ"), "updated": None,
            "hostId": "h", "tenant_id": PROJECT_ID, "user_id": user_id, "metadata": {},
            "OS-EXT-STS:vm_state": status.lower(), "OS-EXT-STS:task_state": None,
            "OS-EXT-STS:power_state": 1 if status == "ACTIVE" else 0,
            "fault": {"code": 500, "message": "No valid host was found."} if status == "ERROR" else None,
            "locked": False, "tags": [], "description": None, "reservation": reservation,
        }
        pid = str(uuid.uuid4())
        self.ports[pid] = {"id": pid, "name": "", "device_id": sid, "device_owner": "compute:nova",
                           "network_id": "net-shared", "mac_address": "fa:16:3e:00:00:01",
                           "status": "ACTIVE", "admin_state_up": True,
                           "project_id": PROJECT_ID, "tenant_id": PROJECT_ID,
                           "fixed_ips": [{"subnet_id": "sub-shared",
                                          "ip_address": f"10.52.0.{next(self._fixed)}"}]}
        if floating_ip is not None:
            if floating_ip in self.fip_pool:
                self.fip_pool.remove(floating_ip)
            fid = str(uuid.uuid4())
            self.floatingips[fid] = {
                "id": fid, "floating_ip_address": floating_ip, "port_id": pid,
                "fixed_ip_address": self.ports[pid]["fixed_ips"][0]["ip_address"],
                "floating_network_id": "net-public", "status": "ACTIVE", "router_id": "router",
                "project_id": PROJECT_ID, "tenant_id": PROJECT_ID, "description": "", "tags": []}
        return self.servers[sid]

    def unbound_floating_ips(self) -> list[str]:
        """Addresses allocated to the project and attached to nothing (what a launch must not leave)."""
        return sorted(f["floating_ip_address"] for f in self.floatingips.values() if not f["port_id"])

    def server_by_name(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.servers.values() if s["name"] == name]

    def fip_of_server(self, server_id: str) -> list[dict[str, Any]]:
        ports = {p["id"] for p in self.ports.values() if p["device_id"] == server_id}
        return [f for f in self.floatingips.values() if f["port_id"] in ports]

    # --- transport ------------------------------------------------------------------------------

    def install(self, mocker: requests_mock.Mocker) -> None:
        mocker.add_matcher(self._handle)

    def _resp(self, request: Any, status: int = 200, body: Any = None,
              headers: dict[str, str] | None = None) -> Any:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        text = "" if body is None else json.dumps(body)
        return requests_mock.create_response(request, status_code=status, text=text, headers=h)

    def _handle(self, request: Any) -> Any:
        url = urlparse(request.url)
        path = url.path.rstrip("/") or "/"
        origin = f"{url.scheme}://{url.hostname}"
        if self.site is not None and origin not in (RESOURCE_API, SITES[self.site]):
            return None  # another site's host: the next fake installed on the mocker answers it
        self.log.append((request.method, f"{url.scheme}://{url.netloc}{path}"))
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = None
        if request.body:
            raw = request.body.decode() if isinstance(request.body, bytes) else request.body
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
        if origin == RESOURCE_API:
            return self._resource_api(request, path)
        if origin not in SITES.values():
            return self._resp(request, 599, {"error": f"fake: unknown host {url.hostname}"})
        port = url.port
        handler = {5000: self._keystone, 1234: self._blazar, 8774: self._nova,
                   9696: self._neutron, 9292: self._glance}.get(port)
        if handler is None:
            return self._resp(request, 404, {"error": "no such service"})
        return handler(request, origin, path, query, body)

    # --- resource API ---------------------------------------------------------------------------

    def _resource_api(self, request: Any, path: str) -> Any:
        if path == "/sites.json":
            items = [{"name": n, "web": w, "location": "Nowhere", "site_class": "core",
                      "user_support_contact": "help@example.org"} for n, w in SITES.items()]
            return self._resp(request, 200, {"items": items})
        return self._resp(request, 404, {"error": "not found"})

    # --- keystone -------------------------------------------------------------------------------

    def _catalog(self, origin: str) -> list[dict[str, Any]]:
        region = next(n for n, w in SITES.items() if w == origin)

        def svc(kind: str, name: str, url: str) -> dict[str, Any]:
            return {"type": kind, "name": name, "id": name, "endpoints": [
                {"id": f"{name}-{i}", "interface": i, "region": region, "region_id": region,
                 "url": url} for i in ("public", "internal", "admin")]}

        return [
            svc("identity", "keystone", f"{origin}:5000/v3"),
            svc("reservation", "blazar", f"{origin}:1234/v1"),
            svc("compute", "nova", f"{origin}:8774/v2.1"),
            svc("network", "neutron", f"{origin}:9696"),
            svc("image", "glance", f"{origin}:9292"),
        ]

    def _keystone(self, request: Any, origin: str, path: str, query: dict, body: Any) -> Any:
        if path in ("/v3", "/"):
            return self._resp(request, 200, {"version": {
                "id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
                "links": [{"rel": "self", "href": f"{origin}:5000/v3/"}],
                "media-types": [{"base": "application/json",
                                 "type": "application/vnd.openstack.identity-v3+json"}]}})
        if path == "/v3/auth/tokens" and request.method == "POST":
            self.auth_bodies.append(body)
            given = body["auth"]["identity"].get("application_credential", {}).get("id")
            if self.reject_auth or (self.credential_id is not None and given != self.credential_id):
                return self._resp(request, 401, {"error": {
                    "code": 401, "title": "Unauthorized",
                    "message": "The request you have made requires authentication."}})
            expires = (_now() + timedelta(hours=8)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
            token = {
                "methods": body["auth"]["identity"]["methods"],
                "expires_at": expires, "issued_at": _now().strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                "user": {"id": USER_ID, "name": "someone", "domain": {"id": "default", "name": "Default"}},
                "project": {"id": PROJECT_ID, "name": "CHI-000000",
                            "domain": {"id": "chameleon", "name": "chameleon"}},
                "roles": [{"id": "r", "name": "member"}],
                "catalog": self._catalog(origin),
            }
            return self._resp(request, 201, {"token": token}, {"X-Subject-Token": "fake-token"})
        return self._resp(request, 404, {"error": {"code": 404, "message": "not found"}})

    # --- blazar ---------------------------------------------------------------------------------

    def _lease_view(self, lease: dict[str, Any], advance: bool = False) -> dict[str, Any]:
        script = self.lease_status_script.get(lease["name"])
        if script and advance:
            lease["status"] = script.pop(0) if len(script) > 1 else script[0]
        for r in lease["reservations"]:
            r["status"] = "active" if lease["status"] == "ACTIVE" else "pending"
        return copy.deepcopy(lease)

    def _blazar_refusal(self, request: Any) -> Any:
        code = self.blazar_refusal_status
        return self._resp(request, code, {"error_code": code, "error_name": "NotEnoughHostsAvailable",
                                          "error_message": self.blazar_refusal})

    def _blazar(self, request: Any, origin: str, path: str, query: dict, body: Any) -> Any:
        if path in ("/", "/v1") and request.method == "GET":
            return self._resp(request, 200, {"versions": [{"id": "v1.0", "status": "CURRENT",
                              "links": [{"rel": "self", "href": f"{origin}:1234/v1/"}]}]})
        m = re.fullmatch(r"/v1/leases(?:/([^/]+))?", path)
        if not m:
            return self._resp(request, 404, {"error_code": 404, "error_message": "Not found"})
        lease_id = m.group(1)
        if lease_id is None and request.method == "GET":
            return self._resp(request, 200, {"leases": [self._lease_view(lz) for lz in self.leases.values()]})
        if lease_id is None and request.method == "POST":
            self.lease_create_bodies.append(body)
            if self.blazar_refusal:
                return self._blazar_refusal(request)
            start = (datetime.strptime(body["start_date"], "%Y-%m-%d %H:%M")
                     if body["start_date"] != "now" else _now())
            end = datetime.strptime(body["end_date"], "%Y-%m-%d %H:%M")
            node_type = "gpu_p100"
            lease = self.add_lease(body["name"], status="PENDING", start=start,
                                   hours=(end - start).total_seconds() / 3600, node_type=node_type)
            lease["reservations"][0]["resource_properties"] = body["reservations"][0]["resource_properties"]
            return self._resp(request, 201, {"lease": copy.deepcopy(lease)})
        lease = self.leases.get(lease_id or "")
        if lease is None:
            return self._resp(request, 404, {
                "error_code": 404, "error_name": "NotFound",
                "error_message": f"Object with {{'lease_id': '{lease_id}'}} not found"})
        if request.method == "GET":
            return self._resp(request, 200, {"lease": self._lease_view(lease, advance=True)})
        if request.method == "DELETE":
            del self.leases[lease_id]
            return self._resp(request, 204)
        if request.method == "PUT":
            self.lease_update_bodies.append(body)
            if self.blazar_refusal:
                return self._blazar_refusal(request)
            for key in ("end_date", "start_date"):
                if key in body:
                    lease[key] = _blazar_time(datetime.strptime(body[key], "%Y-%m-%d %H:%M"))
            return self._resp(request, 200, {"lease": copy.deepcopy(lease)})
        return self._resp(request, 405, {"error_code": 405, "error_message": "Method not allowed"})

    # --- nova -----------------------------------------------------------------------------------

    def _nova_resp(self, request: Any, status: int = 200, body: Any = None) -> Any:
        return self._resp(request, status, body, {
            "X-OpenStack-Nova-API-Version": NOVA_VERSION,
            "OpenStack-API-Version": f"compute {NOVA_VERSION}",
            "Vary": "OpenStack-API-Version, X-OpenStack-Nova-API-Version"})

    def _server_view(self, s: dict[str, Any], origin: str) -> dict[str, Any]:
        addresses: dict[str, list[dict[str, Any]]] = {}
        for p in self.ports.values():
            if p["device_id"] != s["id"]:
                continue
            net = self.networks[p["network_id"]]["name"]
            fixed = p["fixed_ips"][0]["ip_address"]
            addresses.setdefault(net, []).append({"version": 4, "addr": fixed, "OS-EXT-IPS:type": "fixed",
                                                  "OS-EXT-IPS-MAC:mac_addr": p["mac_address"]})
            for f in self.floatingips.values():
                if f["port_id"] == p["id"]:
                    addresses[net].append({"version": 4, "addr": f["floating_ip_address"],
                                           "OS-EXT-IPS:type": "floating",
                                           "OS-EXT-IPS-MAC:mac_addr": p["mac_address"]})
        view = copy.deepcopy(s)
        view["addresses"] = addresses
        view["links"] = [{"rel": "self", "href": f"{origin}:8774/v2.1/servers/{s['id']}"}]
        return view

    def _nova(self, request: Any, origin: str, path: str, query: dict, body: Any) -> Any:
        version_doc = {"id": "v2.1", "status": "CURRENT", "version": "2.96", "min_version": "2.1",
                       "updated": "2013-07-23T11:33:21Z",
                       "links": [{"rel": "self", "href": f"{origin}:8774/v2.1/"}]}
        if path == "/":
            return self._nova_resp(request, 200, {"versions": [version_doc]})
        if path == "/v2.1":
            return self._nova_resp(request, 200, {"version": version_doc})
        p = path[len("/v2.1"):]
        if p == "/flavors/detail" or p == "/flavors":
            return self._nova_resp(request, 200, {"flavors": [{
                "id": "flavor-baremetal", "name": "baremetal", "ram": 1, "disk": 1, "vcpus": 1,
                "OS-FLV-EXT-DATA:ephemeral": 0, "os-flavor-access:is_public": True, "swap": "",
                "rxtx_factor": 1.0, "description": None, "extra_specs": {},
                "links": []}]})
        m = re.fullmatch(r"/os-keypairs(?:/([^/]+))?", p)
        if m:
            name = m.group(1)
            def kp(n: str) -> dict[str, Any]:
                return {"name": n, "public_key": f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFAKE {n}",
                        "fingerprint": "aa:bb", "type": "ssh", "user_id": USER_ID}
            if name is None:
                return self._nova_resp(request, 200,
                                       {"keypairs": [{"keypair": kp(n)} for n in self.keypairs]})
            if name in self.keypairs:
                return self._nova_resp(request, 200, {"keypair": kp(name)})
            return self._nova_resp(request, 404, {"itemNotFound": {"code": 404,
                                   "message": f"Keypair {name} not found for user {USER_ID}"}})
        if p.startswith("/servers"):
            self._nova_tick()
        if p in ("/servers/detail", "/servers") and request.method == "GET":
            return self._list_servers(request, origin, p, query)
        if p == "/servers" and request.method == "POST":
            return self._create_server(request, origin, body)
        m = re.fullmatch(r"/servers/([^/]+)/action", p)
        if m and request.method == "POST":
            s = self.servers.get(m.group(1))
            if s is None:
                return self._nova_resp(request, 404, {"itemNotFound": {"code": 404,
                                       "message": f"Instance {m.group(1)} could not be found."}})
            self.server_actions.append((s["id"], body))
            if "rebuild" in body:
                image_ids = {f"img-{i}": n for i, n in enumerate(self.images)}
                if body["rebuild"].get("imageRef") not in image_ids:
                    return self._nova_resp(request, 400,
                                           {"badRequest": {"code": 400, "message": "Image not found"}})
                # Nova keeps the server, its ports (so its floating IP) and its reservation; the disk is new
                s.update(status="ACTIVE", image={"id": body["rebuild"]["imageRef"], "links": []},
                         updated=_now().strftime("%Y-%m-%dT%H:%M:%SZ"))
                return self._nova_resp(request, 202, {"server": self._server_view(s, origin)})
            return self._nova_resp(request, 400,
                                   {"badRequest": {"code": 400, "message": "fake: unsupported action"}})
        m = re.fullmatch(r"/servers/([^/]+)", p)
        if m:
            s = self.servers.get(m.group(1))
            if s is None:
                return self._nova_resp(request, 404, {"itemNotFound": {"code": 404,
                                       "message": f"Instance {m.group(1)} could not be found."}})
            if request.method == "GET":
                self._advance_build(s)
                return self._nova_resp(request, 200, {"server": self._server_view(s, origin)})
            if request.method == "DELETE":
                if self.delete_polls <= 0:
                    self._deleted(s["id"])
                elif s["id"] not in self.deleting:  # Nova accepts the delete and goes on in the background
                    self.deleting[s["id"]] = self.delete_polls
                    s["OS-EXT-STS:task_state"] = "deleting"
                    self.building.pop(s["id"], None)
                return self._nova_resp(request, 204)
        return self._nova_resp(request, 404, {"itemNotFound": {"code": 404, "message": f"fake nova: {p}"}})

    def _deleted(self, sid: str) -> None:
        """Nova has finished deleting ``sid``: the server and its ports go; a floating IP still attached
        to a port is left allocated to the project, unbound (Neutron does not release it)."""
        self.servers.pop(sid, None)
        self.deleting.pop(sid, None)
        self.building.pop(sid, None)
        for pid in [pid for pid, port in self.ports.items() if port["device_id"] == sid]:
            for f in self.floatingips.values():
                if f["port_id"] == pid:
                    f.update(port_id=None, fixed_ip_address=None, status="DOWN")
            del self.ports[pid]

    def _nova_tick(self) -> None:
        """One more Nova request: deletes in progress come closer to done."""
        for sid in list(self.deleting):
            self.deleting[sid] -= 1
            if self.deleting[sid] < 0:
                self._deleted(sid)

    def _advance_build(self, s: dict[str, Any]) -> None:
        """One more read of a building server: BUILD (scheduling, then spawning) until its status."""
        state = self.building.get(s["id"])
        if state is None:
            return
        state[0] -= 1
        if state[0] < 0:
            del self.building[s["id"]]
            s.update({"status": state[1], "OS-EXT-STS:vm_state": state[1].lower(),
                      "OS-EXT-STS:task_state": None,
                      "fault": {"code": 500, "message": "No valid host was found."}
                      if state[1] == "ERROR" else None})
        else:
            s["OS-EXT-STS:task_state"] = "spawning" if state[0] < self.build_polls // 2 else "scheduling"

    def _list_servers(self, request: Any, origin: str, p: str, query: dict[str, str]) -> Any:
        """Nova's paginated listing: newest first, ``limit`` (at most max_limit) and ``marker``."""
        items = list(reversed(list(self.servers.values())))
        if "name" in query:
            items = [s for s in items if re.search(query["name"], s["name"])]
        if "marker" in query:
            ids = [s["id"] for s in items]
            if query["marker"] not in ids:
                return self._nova_resp(request, 400, {"badRequest": {
                    "code": 400, "message": f"marker [{query['marker']}] not found"}})
            items = items[ids.index(query["marker"]) + 1:]
        limit = min(int(query.get("limit", self.nova_page_size)), self.nova_page_size)
        page = items[:limit]
        for s in page:
            self._advance_build(s)
        body: dict[str, Any] = {"servers": [self._server_view(s, origin) for s in page]}
        if page and len(page) == limit:  # Nova links the next page whenever a page is full
            body["servers_links"] = [{"rel": "next", "href": (
                f"{origin}:8774/v2.1{p}?limit={limit}&marker={page[-1]['id']}")}]
        return self._nova_resp(request, 200, body)

    def _create_server(self, request: Any, origin: str, body: dict[str, Any]) -> Any:
        self.server_create_bodies.append(body)
        srv = body["server"]
        if self.server_create_error:
            code, message = self.server_create_error
            key = "forbidden" if code == 403 else "badRequest"
            return self._nova_resp(request, code, {key: {"code": code, "message": message}})
        hints = body.get("os:scheduler_hints") or body.get("OS-SCH-HNT:scheduler_hints") or {}
        image_ids = {f"img-{i}": n for i, n in enumerate(self.images)}
        if srv.get("imageRef") not in image_ids:
            return self._nova_resp(request, 400, {"badRequest": {"code": 400, "message": "Image not found"}})
        if srv.get("key_name") not in self.keypairs:
            return self._nova_resp(request, 400, {"badRequest": {"code": 400,
                                   "message": "Invalid key_name provided."}})
        if not hints.get("reservation"):
            return self._nova_resp(request, 400, {"badRequest": {"code": 400,
                                   "message": "a reservation is required on bare metal"}})
        status = self.server_status.get(srv["name"], self.default_server_status)
        server = self.add_server(srv["name"], status=status, reservation=hints["reservation"])
        server["key_name"] = srv.get("key_name")
        server["image"] = {"id": srv["imageRef"], "links": []}
        sid = server["id"]
        if self.build_polls > 0:  # a bare-metal deploy: BUILD for a while, then its status
            self.building[sid] = [self.build_polls, status]
            server.update({"status": "BUILD", "OS-EXT-STS:vm_state": "building",
                           "OS-EXT-STS:task_state": "scheduling", "fault": None})
        return self._nova_resp(request, 202, {"server": {"id": sid, "links": [], "adminPass": "x",
                                                         "OS-DCF:diskConfig": "MANUAL",
                                                         "security_groups": [{"name": "default"}]}})

    # --- neutron --------------------------------------------------------------------------------

    def _neutron(self, request: Any, origin: str, path: str, query: dict, body: Any) -> Any:
        if path == "/":
            return self._resp(request, 200, {"versions": [{"id": "v2.0", "status": "CURRENT",
                              "links": [{"rel": "self", "href": f"{origin}:9696/v2.0/"}]}]})
        if path == "/v2.0":
            return self._resp(request, 200, {"resources": []})
        p = path[len("/v2.0"):].removesuffix(".json")

        def filtered(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
            keep = []
            for it in items:
                if all(str(it.get(k)) == v for k, v in query.items() if k in it):
                    keep.append(it)
            return keep

        if p == "/networks":
            return self._resp(request, 200,
                              {"networks": filtered(copy.deepcopy(list(self.networks.values())))})
        m = re.fullmatch(r"/networks/([^/]+)", p)
        if m:
            net = self.networks.get(m.group(1))
            if net is None:
                return self._resp(request, 404, {"NeutronError": {"type": "NetworkNotFound",
                                  "message": f"Network {m.group(1)} could not be found.", "detail": ""}})
            return self._resp(request, 200, {"network": copy.deepcopy(net)})
        if p == "/ports":
            return self._resp(request, 200, {"ports": filtered(copy.deepcopy(list(self.ports.values())))})
        if p == "/floatingips" and request.method == "GET":
            return self._resp(request, 200,
                              {"floatingips": filtered(copy.deepcopy(list(self.floatingips.values())))})
        if p == "/floatingips" and request.method == "POST":
            if not self.fip_pool:
                return self._resp(request, 409, {"NeutronError": {"type": "IpAddressGenerationFailure",
                                  "message": "No more IP addresses available on network net-public.",
                                  "detail": ""}})
            fid = str(uuid.uuid4())
            fip = {"id": fid, "floating_ip_address": self.fip_pool.pop(0), "port_id": None,
                   "fixed_ip_address": None, "floating_network_id": body["floatingip"]["floating_network_id"],
                   "status": "DOWN", "router_id": None, "project_id": PROJECT_ID, "tenant_id": PROJECT_ID,
                   "description": "", "tags": []}
            self.floatingips[fid] = fip
            return self._resp(request, 201, {"floatingip": copy.deepcopy(fip)})
        m = re.fullmatch(r"/floatingips/([^/]+)", p)
        if m:
            fip = self.floatingips.get(m.group(1))
            if fip is None:
                return self._resp(request, 404, {"NeutronError": {"type": "FloatingIPNotFound",
                                  "message": f"Floating IP {m.group(1)} could not be found", "detail": ""}})
            if request.method == "GET":
                return self._resp(request, 200, {"floatingip": copy.deepcopy(fip)})
            if request.method == "DELETE":
                self.fip_pool.append(fip["floating_ip_address"])
                del self.floatingips[fip["id"]]
                return self._resp(request, 204)
            if request.method == "PUT":
                port_id = body["floatingip"].get("port_id")
                if port_id is not None and self.association_error:
                    code, kind, message = self.association_error
                    return self._resp(request, code, {"NeutronError": {"type": kind, "message": message,
                                                                       "detail": ""}})
                if port_id is not None and self.refuse_association:
                    return self._resp(request, 400, {"NeutronError": {
                        "type": "BadRequest", "message": "External network is not reachable from subnet",
                        "detail": ""}})
                if port_id is not None:
                    port = self.ports.get(port_id)
                    if port is None:
                        return self._resp(request, 404, {"NeutronError": {"type": "PortNotFound",
                                          "message": f"Port {port_id} could not be found.", "detail": ""}})
                    if fip["port_id"] not in (None, port_id):
                        return self._resp(request, 409, {"NeutronError": {
                            "type": "FloatingIPPortAlreadyAssociated", "message": "already associated",
                            "detail": ""}})
                    fip.update(port_id=port_id, fixed_ip_address=port["fixed_ips"][0]["ip_address"],
                               status="ACTIVE")
                else:
                    fip.update(port_id=None, fixed_ip_address=None, status="DOWN")
                return self._resp(request, 200, {"floatingip": copy.deepcopy(fip)})
        return self._resp(request, 404, {"NeutronError": {"type": "HTTPNotFound",
                                                          "message": f"fake neutron: {p}", "detail": ""}})

    # --- glance ---------------------------------------------------------------------------------

    def _glance(self, request: Any, origin: str, path: str, query: dict, body: Any) -> Any:
        if path == "/":
            return self._resp(request, 300, {"versions": [{"id": "v2.16", "status": "CURRENT",
                              "links": [{"rel": "self", "href": f"{origin}:9292/v2/"}]}]})
        if path == "/v2/images":
            images = [{"id": f"img-{i}", "name": n, "status": "active", "visibility": "public",
                       "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z",
                       "build-repo": "https://github.com/ChameleonCloud/cc-images", "tags": [],
                       "self": f"/v2/images/img-{i}", "schema": "/v2/schemas/image"}
                      for i, n in enumerate(self.images)]
            if "name" in query:
                images = [im for im in images if im["name"] == query["name"]]
            return self._resp(request, 200, {"images": images, "schema": "/v2/schemas/images",
                                             "first": "/v2/images"})
        m = re.fullmatch(r"/v2/images/([^/]+)", path)
        if m:
            for i, n in enumerate(self.images):
                if m.group(1) == f"img-{i}":
                    return self._resp(request, 200, {"id": f"img-{i}", "name": n, "status": "active",
                                                     "created_at": "2025-01-01T00:00:00Z"})
            return self._resp(request, 404, {"message": "not found"})
        if path == "/v2/schemas/image":
            return self._resp(request, 200, {"name": "image", "properties": {},
                                             "additionalProperties": {"type": "string"}})
        return self._resp(request, 404, {"message": f"fake glance: {path}"})


def install_sites(mocker: requests_mock.Mocker, fakes: dict[str, FakeChameleon]) -> None:
    """Serve each site of ``fakes`` (site name -> its fake, whose :attr:`~FakeChameleon.site` is set to it)
    through one mocker."""
    for site, fake in fakes.items():
        assert fake.site == site, f"the fake for {site} serves {fake.site}"
        fake.install(mocker)
