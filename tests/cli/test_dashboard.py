"""``zlink-trio dashboard``: the JSON the page polls, and the page itself in a real browser.

The JSON tests run the Starlette app (``zlink_trio.cli.dashboard_app.build_app``) over a
memory store through httpx's ASGI transport, the store's records made with its own
transactions at chosen times (the app's ``clock`` says which leases are live).

The browser test starts two real nodes on a shared SQLite file, serves the dashboard in
the same Trio loop with Hypercorn, and drives Debian's headless chromium with Selenium
from a worker thread (the loop keeps serving meanwhile; the thread calls back into it
with ``trio.from_thread.run`` to relocate a Spot). Without the browser it skips locally
and fails under ``CI`` (``.ci/run`` installs chromium and chromium-driver). Every wait
is a bounded ``WebDriverWait`` poll, and everything runs under ``trio.fail_after``.
With ``ZLINK_DASHBOARD_SCREENSHOT=PATH`` it also saves its screenshot there (how
``docs/images/dashboard.png`` was made).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import httpx
import pytest
import trio

import zlink_trio as zl
from statecharts import SpotAuthority, compile
from statecharts.trace import TraceRecord, trace_line
from zlink_trio import cli
from zlink_trio.cli.dashboard import relocator
from zlink_trio.cli.dashboard_app import build_app, serve_app, shown_url
from zlink_trio.core.descriptor import NodeDescriptor
from zlink_trio.core.errors import Unavailable
from zlink_trio.core.identity import NodeRid, SpotKind, new_entry_spot_id
from zlink_trio.core.placement import Role
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.store import Store

PAGE_FILES = Path(cli.__file__).parent / "dashboard_page"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


# -- the JSON, over a memory store -------------------------------------------------------


def _rid(n: int) -> NodeRid:
    return NodeRid(n.to_bytes(16, "big"))


async def _claim(store: Store, node_id: str, n: int, *, now: float = 0.0,
                 weight: float = 1.0) -> NodeClaim:
    descriptor = NodeDescriptor(
        mesh="world", node_rid=_rid(n), node_id=node_id,
        endpoint=f"ws://127.0.0.1:9/{node_id}", roles=[Role.OBJECT_SERVER, Role.OBJECT_CLIENT],
        served_types={"counter": SpotKind.INSTANCE}, capacity=10, placement_weight=weight,
        entry_spot_id=new_entry_spot_id(node_id))
    return await store.location.new_claim(descriptor, now=now, lease=10.0)


async def _ready(store: Store, owner: NodeClaim, spot_id: str, *, now: float = 0.0) -> Any:
    fence = await store.location.reserve(spot_id, kind=SpotKind.INSTANCE, stable_type="counter",
                                         mesh="world", owner=owner.owner(), now=now)
    return await store.location.commit_ready(fence, now=now)


@asynccontextmanager
async def _client(store: Any, *, clock: float = 1.0, **options: Any,
                  ) -> AsyncIterator[httpx.AsyncClient]:
    app = build_app(store, store_url="sqlite:///srv/zlink.db", clock=lambda: clock, **options)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1:8765") as client:
        yield client


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    async with open_store("memory://") as opened:
        yield opened


async def test_overview_shows_live_nodes_weights_draining_and_spot_counts(store):
    with trio.fail_after(10):
        a = await _claim(store, "node-a", 1)
        b = await _claim(store, "node-b", 2, weight=0.5)
        for spot_id in ("c-1", "c-2"):
            await _ready(store, a, spot_id)
        await _ready(store, b, "c-3")
        await store.location.close_placement("world", b.descriptor.node_rid,
                                             b.lifecycle_generation)
        async with _client(store) as client:
            shown = (await client.get("/api/nodes")).json()
    by_id = {n["nodeId"]: n for n in shown["nodes"]}
    assert sorted(by_id) == ["node-a", "node-b"]
    assert (by_id["node-a"]["spots"], by_id["node-b"]["spots"]) == (2, 1)
    assert by_id["node-a"]["spotsByState"] == {"ready": 2}
    assert (by_id["node-a"]["placementWeight"], by_id["node-b"]["placementWeight"]) == (1.0, 0.5)
    assert (by_id["node-a"]["acceptsPlacements"], by_id["node-b"]["acceptsPlacements"]) == (
        True, False)
    assert by_id["node-a"]["leaseLeft"] == 9.0  # claimed at 0 for 10 s, read at 1
    assert shown["deadLifecycles"] == []
    assert (shown["spotsComplete"], shown["recordsRead"]) == (True, 5)  # 2 Entry claims too


async def test_dead_lifecycles_still_owning_records_with_the_release_command(store):
    with trio.fail_after(10):
        gone = await _claim(store, "gone", 1, now=0.0)
        await _claim(store, "alive", 2, now=15.0)
        await _ready(store, gone, "c-1")
        async with _client(store, clock=20.0) as client:
            shown = (await client.get("/api/nodes")).json()
    assert [n["nodeId"] for n in shown["nodes"]] == ["alive"]
    (dead,) = shown["deadLifecycles"]
    assert (dead["nodeId"], dead["spots"], dead["spotsByState"]) == ("gone", 1, {"ready": 1})
    assert dead["release"] == "zlink-trio release --store sqlite:///srv/zlink.db --node gone"


async def test_moves_in_flight_name_their_source_and_target(store):
    with trio.fail_after(10):
        a = await _claim(store, "node-a", 1)
        b = await _claim(store, "node-b", 2)
        record = await _ready(store, a, "c-1")
        await _ready(store, a, "c-2")
        async with _client(store) as client:
            assert (await client.get("/api/moves")).json()["moves"] == []
            await store.location.begin_relocation(record.fence(), target=b.owner(), now=0.0)
            (move,) = (await client.get("/api/moves")).json()["moves"]
            await store.location.seal_relocation(record.fence(), now=0.0)
            overview = (await client.get("/api/overview")).json()
    assert (move["spotId"], move["state"], move["stableType"]) == ("c-1", "relocating",
                                                                   "counter")
    assert move["source"] == {"nodeId": "node-a", "nodeRid": str(a.descriptor.node_rid),
                              "lifecycleGeneration": 1}
    assert move["target"]["nodeId"] == "node-b"
    assert [m["state"] for m in overview["moves"]] == ["sealed"]
    assert {n["nodeId"]: n["spotsByState"] for n in overview["nodes"]}["node-a"] == {
        "ready": 1, "sealed": 1}


async def test_a_spot_by_id_and_the_errors_of_a_bad_one(store):
    with trio.fail_after(10):
        a = await _claim(store, "node-a", 1)
        await _ready(store, a, "c-1")
        async with _client(store) as client:
            found = await client.get("/api/spot/c-1")
            missing = await client.get("/api/spot/nobody")
            malformed = await client.get("/api/spot/" + "x" * 300)
    assert found.status_code == 200
    record = found.json()
    assert (record["spotId"], record["state"], record["ownerNode"]) == ("c-1", "ready", "node-a")
    assert record["owner"]["shown"] == "node-a/1"
    assert record["ownerLease"] == {"live": True, "expiresAt": 10.0}
    assert missing.status_code == 404
    assert "'nobody' is Missing" in missing.json()["error"]["message"]
    assert malformed.status_code == 400
    assert malformed.json()["error"]["message"].startswith("not a Spot ID")


async def test_charts_svg_and_traces(store):
    table = compile(SpotAuthority)
    good = "".join(trace_line("SpotAuthority", s, e, table.step(s, e))
                   for s, e in (("missing", "reserve"), ("creating", "commit_ready")))
    with trio.fail_after(10):
        async with _client(store, trace=[]) as client:
            listing = (await client.get("/api/charts")).json()["charts"]
            drawn = await client.get("/api/charts/spot_authority.svg")
            unknown = await client.get("/api/charts/nope.svg")
            posted = await client.post("/api/charts/SpotAuthority/trace", content=good)
            malformed = await client.post("/api/charts/spot_authority/trace", content="{oops\n")
            wrong = await client.post("/api/charts/spot_authority/trace", content=trace_line(
                "SpotAuthority", "missing", "commit_ready", "ready"))
            other = await client.post("/api/charts/close/trace", content=good)
            none = (await client.get("/api/charts/spot_authority/trace")).json()
    assert "spot_authority" in [c["name"] for c in listing]
    assert drawn.headers["content-type"].startswith("image/svg+xml")
    assert '<g class="state" data-state="ready">' in drawn.text
    assert unknown.status_code == 404
    assert "no chart 'nope'; the charts are spot_authority" in unknown.json()["error"]["message"]
    assert posted.status_code == 200
    assert [r["target"] for r in posted.json()["records"]] == ["creating", "ready"]
    assert malformed.status_code == 400
    assert "line 1: not JSON" in malformed.json()["error"]["message"]
    assert wrong.status_code == 400
    assert "is not a transition of the chart" in wrong.json()["error"]["message"]
    assert other.status_code == 400
    assert "no records of CloseOperation" in other.json()["error"]["message"]
    assert none == {"chart": "SpotAuthority", "records": []}


async def test_the_trace_given_on_the_command_line_is_served_per_chart(store):
    table = compile(SpotAuthority)
    records = [TraceRecord("SpotAuthority", "missing", "reserve", table.step("missing",
                                                                            "reserve"))]
    with trio.fail_after(10):
        async with _client(store, trace=records) as client:
            config = (await client.get("/api/config")).json()
            served = (await client.get("/api/charts/spot_authority/trace")).json()
    assert config["traceCharts"] == ["spot_authority"]
    assert config["store"] == "sqlite:///srv/zlink.db"
    assert served["records"] == [records[0].to_json()]


class _DownLocation:
    async def descriptors(self, *args: Any, **kwargs: Any) -> Any:
        raise Unavailable("connection refused (the test's store is down)")

    async def find(self, spot_id: str) -> Any:
        await trio.sleep_forever()


class _DownStore:
    location = _DownLocation()


async def test_a_store_that_fails_or_hangs_is_an_error_object_and_the_server_keeps_serving():
    with trio.fail_after(10):
        async with _client(_DownStore(), timeout=0.05) as client:
            down = await client.get("/api/overview")
            slow = await client.get("/api/spot/c-1")
            page = await client.get("/")
            nowhere = await client.get("/api/nowhere")
            wrong_method = await client.delete("/api/overview")
    assert down.status_code == 503
    assert down.json() == {"error": {"status": 503, "message": "store unavailable: connection "
                                                               "refused (the test's store is "
                                                               "down)"}}
    assert slow.status_code == 504
    assert "did not answer within 0.05 s" in slow.json()["error"]["message"]
    assert page.status_code == 200
    assert nowhere.status_code == 404
    assert "GET /api/nowhere: no such page or API here" in nowhere.json()["error"]["message"]
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["status"] == 405


async def test_the_page_and_its_assets_are_served_and_load_nothing_from_outside(store):
    with trio.fail_after(10):
        async with _client(store) as client:
            page = await client.get("/")
            script = await client.get("/dashboard.js")
            style = await client.get("/dashboard.css")
    assert page.headers["content-type"].startswith("text/html")
    assert '<script src="/dashboard.js"' in page.text
    assert script.headers["content-type"].startswith("text/javascript")
    assert style.status_code == 200
    for text in (page.text, script.text, style.text):
        assert "http://" not in text
        assert "https://" not in text
        assert "//cdn" not in text


async def test_relocate_needs_an_action_and_goes_to_the_spots_mesh(store):
    asked = []

    async def relocate(spot_id: str, mesh: str, to: str | None) -> dict[str, object]:
        asked.append((spot_id, mesh, to))
        return {"spotId": spot_id, "outcome": "committed", "node": to}

    with trio.fail_after(10):
        a = await _claim(store, "node-a", 1)
        await _ready(store, a, "c-1")
        async with _client(store) as client:
            refused = await client.post("/api/relocate/c-1", json={"to": "node-b"})
        async with _client(store, relocate=relocate) as client:
            moved = await client.post("/api/relocate/c-1", json={"to": "node-b"})
            missing = await client.post("/api/relocate/nobody", json={"to": None})
            bad = await client.post("/api/relocate/c-1", content=b"[1]",
                                    headers={"content-type": "application/json"})
            form = await client.post("/api/relocate/c-1", content=b'{"to": null}',
                                     headers={"content-type": "text/plain"})
            other_site = await client.post("/api/relocate/c-1", json={"to": None},
                                           headers={"origin": "https://evil.example"})
            rebound = await client.post("http://evil.example:8765/api/relocate/c-1",
                                        json={"to": None})
    assert refused.status_code == 404
    assert moved.status_code == 200
    assert moved.json()["node"] == "node-b"
    assert asked == [("c-1", "world", "node-b")]
    assert missing.status_code == 404
    assert bad.status_code == 400
    assert (form.status_code, other_site.status_code, rebound.status_code) == (415, 403, 403)
    assert "another site" in other_site.json()["error"]["message"]
    assert "not 'evil.example'" in rebound.json()["error"]["message"]
    assert asked == [("c-1", "world", "node-b")]  # none of them reached the action


def test_shown_url_hides_a_password():
    assert shown_url("redis://:s3cret@10.0.0.1:6379/0") == "redis://:***@10.0.0.1:6379/0"
    assert shown_url("redis://user:pw@h:1/0") == "redis://user:***@h:1/0"
    assert shown_url("sqlite:///var/lib/z.db") == "sqlite:///var/lib/z.db"


def test_the_command_refuses_bad_usage_and_a_missing_extra(capsys, monkeypatch, tmp_path):
    assert cli.main(["--help"]) == 0
    assert "dashboard" in capsys.readouterr().out
    assert cli.main(["dashboard", "--store", "memory://"]) == 2
    assert "in-process memory store" in capsys.readouterr().err
    assert cli.main(["dashboard", "--store", "memory://", "--listen", "nowhere"]) == 2
    assert "invalid HOST:PORT value" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    db = tmp_path / "z.db"
    db.touch()
    assert cli.main(["dashboard", "--store", f"sqlite://{db}", "--trace", str(bad)]) == 2
    assert "line 1: not JSON" in capsys.readouterr().err
    assert cli.main(["dashboard", "--store", "redis://127.0.0.1:1/0", "--timeout", "5"]) == 1
    assert "zlink-trio dashboard: store unavailable: " in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "starlette", None)
    assert cli.main(["dashboard", "--store", "memory://"]) == 2
    assert "pip install 'zlink-trio[dashboard]'" in capsys.readouterr().err


async def _first_line(stream: trio.abc.ReceiveStream) -> str:
    data = b""
    while b"\n" not in data:
        chunk = await stream.receive_some()
        if not chunk:
            break
        data += chunk
    return data.decode()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_the_command_prints_its_url_serves_and_stops_on_a_signal(tmp_path, stop):
    url = f"sqlite://{tmp_path / 'store.db'}"
    async with open_store(url):
        pass
    with trio.fail_after(30):
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "zlink_trio.cli", "dashboard", "--store", url,
             "--listen", "127.0.0.1:0", "--refresh", "0.5"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            line = await _first_line(process.stdout)
            assert line.startswith("zlink-trio dashboard: serving http://127.0.0.1:"), line
            base = line.split()[3]
            async with httpx.AsyncClient() as client:
                config = (await client.get(base + "api/config")).json()
                overview = (await client.get(base + "api/overview")).json()
            process.send_signal(stop)
            status = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        err = await process.stderr.receive_some()
    assert (config["refresh"], config["relocate"]) == (0.5, True)
    assert overview["nodes"] == []
    assert (status, err) == (0, b"")


# -- the page, in a real browser -----------------------------------------------------------


@attrs.frozen
class Put:
    n: int


@attrs.frozen
class Total:
    value: int


class Adapter:
    def capture(self, spot: Any) -> bytes:
        return str(spot.total).encode()

    def restore(self, spot: Any, data: bytes) -> None:
        spot.total = int(data)


@zl.instance_spot("dash-counter", relocation=zl.PreserveStateWith(Adapter()))
class Counter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.total = 0

    @zl.handler
    async def put(self, msg: Put) -> Total:
        self.total += msg.n
        return Total(self.total)


def _need_browser() -> None:
    """Skip without Debian's chromium and chromium-driver -- fail under ``CI``, which must
    never skip the browser test (``.ci/run`` installs them)."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        message = (f"no {' and no '.join(missing)}: install Debian's chromium and "
                   "chromium-driver (apt-get install chromium chromium-driver; .ci/run does)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _browser() -> Any:
    """Headless Debian chromium under Selenium (:func:`_need_browser` first)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,1500"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def _drive(driver: Any, base: str, trace: Path, shot: Path,
           nodes: dict[str, zl.Node]) -> dict[str, Any]:
    """The browser session (in a worker thread); what it saw, for the test to assert."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(driver, 20, poll_frequency=0.1)
    seen: dict[str, Any] = {}

    def text(css: str) -> str:  # in one script: the poll redraws the tables under us
        return str(driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : ''",
            css))

    def spots() -> tuple[str, str]:
        return (text('#nodes tr[data-node-id="node-a"] td.spots'),
                text('#nodes tr[data-node-id="node-b"] td.spots'))

    driver.get(base + "/")
    wait.until(lambda _: spots() == ("3", "0"))
    seen["weights"] = (text('#nodes tr[data-node-id="node-a"] td.weight'),
                       text('#nodes tr[data-node-id="node-b"] td.weight'))
    seen["store"] = text("#store-url")
    seen["moves"] = text("#moves-empty")

    # A Spot by ID, then moved by the page's Relocate button (a client-only node).
    driver.find_element(By.ID, "spot-id").send_keys("k-0")
    driver.find_element(By.ID, "spot-go").click()
    wait.until(lambda _: "node-a/" in text('#spot-record tr[data-field="owner"] td'))
    wait.until(lambda _: text('#relocate-to option[value="node-b"]') == "node-b")
    Select(driver.find_element(By.ID, "relocate-to")).select_by_value("node-b")
    driver.find_element(By.ID, "relocate-go").click()
    wait.until(lambda _: "node-b/" in text('#spot-record tr[data-field="owner"] td'))
    wait.until(lambda _: spots() == ("2", "1"))
    seen["relocated"] = text("#relocate-result")

    # Another, moved by its owner in the test's loop: the page follows by itself.
    result = trio.from_thread.run(lambda: nodes["node-a"].relocate("k-1", to="node-b"))
    seen["outcome"] = result.outcome
    wait.until(lambda _: spots() == ("1", "2"))

    # A chart, and a trace replayed step by step.
    Select(driver.find_element(By.ID, "chart")).select_by_value("spot_authority")
    wait.until(lambda _: driver.find_elements(
        By.CSS_SELECTOR, '#chart-svg[data-chart="spot_authority"] g.state[data-state="ready"]'))
    driver.find_element(By.ID, "trace-file").send_keys(str(trace))

    def current() -> str | None:
        return driver.find_element(By.ID, "chart-svg").get_attribute("data-current-state")

    wait.until(lambda _: current() == "missing")
    seen["highlighted"] = [driver.find_element(
        By.CSS_SELECTOR, "#chart-svg g.state.current").get_attribute("data-state")]
    for _ in range(2):
        driver.find_element(By.ID, "next").click()
        seen["highlighted"].append(current())
    seen["taken"] = driver.find_element(
        By.CSS_SELECTOR, "#chart-svg g.transition.taken").get_attribute("data-event")
    seen["step"] = text("#step")
    driver.find_element(By.ID, "prev").click()
    seen["back"] = current()
    driver.find_element(By.ID, "next").click()
    seen["banner hidden"] = not driver.find_element(By.ID, "error").is_displayed()
    driver.save_screenshot(str(shot))
    extra = os.environ.get("ZLINK_DASHBOARD_SCREENSHOT")
    if extra:
        driver.save_screenshot(extra)
    return seen


async def test_the_page_in_a_browser_follows_the_cluster(tmp_path):
    _need_browser()
    url = f"sqlite://{tmp_path / 'store.db'}"
    table = compile(SpotAuthority)
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(trace_line("SpotAuthority", s, e, table.step(s, e)) for s, e in (
        ("missing", "reserve"), ("creating", "commit_ready"), ("ready", "begin_relocation"))))
    shot = tmp_path / "dashboard.png"
    with trio.fail_after(90):
        driver = await trio.to_thread.run_sync(_browser)
        try:
            async with AsyncExitStack() as stack:
                a = await stack.enter_async_context(zl.open_node(
                    "node-a", store=url, spots=[Counter]))
                b = await stack.enter_async_context(zl.open_node(
                    "node-b", store=url, spots=[Counter], placement_weight=0.0))
                for i in range(3):
                    reply = await a.client.request(f"k-{i}", Put(1), reply=Total
                                                   ).instance_spot("dash-counter").timeout(5)
                    assert reply == Total(1)
                board = await stack.enter_async_context(open_store(url))
                app = build_app(board, store_url=url, refresh=0.2, timeout=5,
                                relocate=relocator(url, timeout=10))
                nursery = await stack.enter_async_context(trio.open_nursery())
                base = await nursery.start(serve_app, app, "127.0.0.1:0")
                seen = await trio.to_thread.run_sync(
                    _drive, driver, base, trace, shot, {"node-a": a, "node-b": b})
                nursery.cancel_scope.cancel()
                assert (await a.spots.find("k-0")).node_rid == b.node_rid
        finally:
            await trio.to_thread.run_sync(driver.quit)
    assert seen["weights"] == ("1", "0")
    assert seen["store"] == url
    assert seen["moves"] == "No move in flight."
    assert seen["relocated"] == "relocated to node-b"
    assert seen["outcome"] is zl.RelocationOutcome.COMMITTED
    assert seen["highlighted"] == ["missing", "creating", "ready"]
    assert seen["taken"] == "commit_ready"
    assert seen["step"] == "step 2 of 3: creating --commit_ready--> ready"
    assert seen["back"] == "creating"
    assert seen["banner hidden"]
    assert shot.read_bytes().startswith(b"\x89PNG")


def test_without_the_browser_ci_fails_and_elsewhere_it_skips(monkeypatch, tmp_path):
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install chromium"):
        _need_browser()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        _need_browser()
