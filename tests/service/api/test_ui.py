"""The pages for people: ``GET /``, the ``/ui`` pages, escaping, and the key form's session cookie.

The browser's view of the same pages (rendering, images, width, outside requests) is
``tests/service/app/test_ui_browser.py``.
"""

from __future__ import annotations

import re
from http.cookies import SimpleCookie

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.api.examples import IRIS_X, IRIS_Y
from service.api.ui.pages import templates
from service.api.ui.session import COOKIE, SESSION_S, new_token, token_is_valid
from service.settings import Settings

KEYS = ["alpha-key", "beta-key"]
SCRIPT = "<script>alert(1)</script>"
CSV_WITH_SCRIPT = "<script>a</script>,b,label\n" + "".join(
    f"{x},{y},{'<b>x</b>' if i < 6 else 'plain'}\n" for i, (x, y) in enumerate(IRIS_X)
)


def train(client: TestClient, name: str, model_type: str = "linear_svm", **extra) -> dict:
    body = {"model_type": model_type, "X": IRIS_X, "y": IRIS_Y, "name": name, **extra}
    response = client.post("/train", json=body)
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture()
def keyed(tmp_path):
    settings = Settings(data_dir=tmp_path, log_level="warning", api_keys=KEYS)
    with TestClient(create_app(settings), follow_redirects=False) as client:
        yield client


def test_home_is_a_page_of_links_or_json(client):
    page = client.get("/", headers={"Accept": "text/html,*/*"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for link in ("/ui", "/docs", "/openapi.json", "/health/live", "/health/ready"):
        assert f'href="{link}"' in page.text
    answer = client.get("/", headers={"Accept": "application/json"})
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["links"]["ui"] == "/ui" and answer.json()["name"] == "bsvm"


def test_every_page_renders_with_its_plots_and_forbids_scripts(client):
    linear = train(client, "lin", evaluation={"cv": 3}, tags={"team": "a"}, description="first")
    client.put("/models/by-name/lin/aliases/prod", json={"version": 1})
    train(client, "lin", evaluation={"cv": 3})
    train(client, "em", "em_svm", params={"alpha": 2.0, "nu": 1.0})
    names = client.get("/ui")
    assert names.status_code == 200
    assert "lin" in names.text and "em" in names.text and "prod → v1" in names.text
    assert ">2</td>" in names.text  # lin's two versions
    versions = client.get("/ui/names/lin").text
    assert "v1" in versions and "v2" in versions and "team=a" in versions
    page = client.get(f"/ui/models/{linear['model_id']}").text
    assert "3 folds" in page and "roc.png" in page and "boundary.png" in page
    em_page = client.get("/ui/models/em").text
    assert "path.png" in em_page and "compare.png" in em_page and "Posterior (mode" in em_page
    for url in re.findall(r'<img src="([^"]+)"', page + em_page):
        png = client.get(url.replace("&amp;", "&"))
        assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n", url
    jobs = client.get("/ui/jobs")
    assert (
        jobs.status_code == 200 and jobs.text.count(">succeeded</td>") == 3
    )  # every training is a job
    assert f'href="/ui/models/{linear["model_id"]}"' in jobs.text and "refresh" not in jobs.text
    for response in (names, jobs):
        csp = response.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src" not in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_a_model_with_draws_shows_its_posterior_and_traces(client):
    params = {"alpha": 2.0, "nu": 1.0, "n_draws": 200, "burn_in": 100, "n_chains": 2}
    train(client, "mc", "mcmc_svm", params=params)
    page = client.get("/ui/models/mc").text
    assert "95 % intervals" in page and "r̂" in page
    traces = re.findall(r'<img src="(/ui/models/[^"]+/trace.png[^"]*)"', page)
    assert len(traces) == 3  # the intercept and both features
    assert client.get(traces[1].replace("&amp;", "&")).headers["content-type"] == "image/png"


def test_a_one_vs_one_model_shows_each_pair_and_links_its_traces(client):
    X = [*IRIS_X, *[[x + 3.0, y] for x, y in IRIS_X[:4]]]
    y = [*IRIS_Y, *["giant"] * 4]
    params = {"alpha": 2.0, "n_draws": 100, "burn_in": 20, "n_chains": 2, "multiclass": "ovo"}
    body = {"model_type": "mcmc_svm", "X": X, "y": y, "name": "pairs", "params": params}
    assert client.post("/train", json=body).status_code == 201
    page = client.get("/ui/models/pairs").text
    classes = sorted(set(y))
    pairs = [f"{classes[j]} vs {classes[i]}" for i in range(3) for j in range(i + 1, 3)]
    assert all(f"<td>{pair}</td>" in page for pair in pairs)
    traces = [
        t.replace("&amp;", "&") for t in re.findall(r'<img src="([^"]+/trace.png[^"]*)"', page)
    ]
    assert len(traces) == 3 * 3 and all("versus=" in t for t in traces)
    answers = [client.get(t) for t in traces[::3]]
    assert all(a.headers["content-type"] == "image/png" for a in answers), answers[0].text


def test_unknown_model_is_a_404_page(client):
    response = client.get("/ui/models/no-such-model")
    assert response.status_code == 404 and "no model named" in response.text
    assert response.headers["content-type"].startswith("text/html")


def test_every_value_a_user_wrote_is_escaped(client):
    """Tags, description, feature names and class labels holding markup reach the page as
    text: no ``<script`` and no tag of ours but the page's own."""
    response = client.post(
        "/train?model_type=linear_svm&target=label&name=xss",
        content=CSV_WITH_SCRIPT,
        headers={"Content-Type": "text/csv"},
    )
    assert response.status_code == 201, response.text
    model_id = response.json()["model_id"]
    train(client, "xss", tags={"note": SCRIPT}, description=SCRIPT, replace_schema=True)
    for url in ("/ui", "/ui/names/xss", f"/ui/models/{model_id}", "/ui/models/xss"):
        text = client.get(url).text
        assert "<script" not in text.lower() and "<b>" not in text, url
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in client.get("/ui/models/xss").text
    assert "&lt;b&gt;x&lt;/b&gt;" in client.get(f"/ui/models/{model_id}").text


def test_a_name_with_markup_is_refused_and_would_be_escaped(client):
    """The API never stores the name ``<script>`` (names are ``[A-Za-z0-9._-]``); were one in
    the database, the templates would still print it as text."""
    refused = client.post(
        "/train", json={"model_type": "lda", "X": IRIS_X, "y": IRIS_Y, "name": "<script>"}
    )
    assert refused.status_code == 422
    row = {"name": "<script>", "model_type": "<i>", "versions": 1, "latest_version": 1,
           "latest_at": "<x>", "aliases": {"<a>": 1}}  # fmt: skip
    html = templates.get_template("names.html").render(
        rows=[row], total=1, page=1, size=100, title="<t>", version="0", refresh=None
    )
    assert "<script" not in html and "&lt;script&gt;" in html and "<i>" not in html


def test_jobs_page_reloads_itself_while_a_job_is_active():
    row = {"job_id": "j_1", "status": "running", "progress": 0.4, "percent": 40,
           "model_type": "lda", "name": "n", "created_at": "t", "url": None, "error": None}  # fmt: skip
    html = templates.get_template("jobs.html").render(
        rows=[row], total=1, page=1, size=100, title="Jobs", version="0", refresh=2
    )
    assert '<meta http-equiv="refresh" content="2">' in html and 'value="40"' in html


# -- with API keys: the key form and its cookie ------------------------------------------------
def test_pages_send_a_browser_without_a_key_to_the_form(keyed):
    response = keyed.get("/ui/models/abc?x=1")
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/key?next=/ui/models/abc%3Fx%3D1"
    assert keyed.get("/ui/key").status_code == 200
    assert keyed.get("/ui/static/ui.css").status_code == 200
    assert keyed.get("/").status_code == 200
    assert keyed.get("/ui", headers={"X-API-Key": KEYS[1]}).status_code == 200


def sign_in(client: TestClient, key: str, next_url: str = "/ui", **headers: str):
    return client.post(
        "/ui/key",
        content=f"key={key}&next={next_url}",
        headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
    )


def test_the_key_form_sets_a_strict_http_only_cookie_for_the_pages_only(keyed):
    assert sign_in(keyed, "wrong").status_code == 401
    response = sign_in(keyed, KEYS[0], "/ui/jobs")
    assert response.status_code == 303 and response.headers["location"] == "/ui/jobs"
    cookie = SimpleCookie(response.headers["set-cookie"])[COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "strict" and cookie["path"] == "/ui"
    assert int(cookie["max-age"]) == SESSION_S
    assert KEYS[0] not in cookie.value
    jar = {COOKIE: cookie.value}
    assert keyed.get("/ui", cookies=jar).status_code == 200
    assert 'action="/ui/logout"' in keyed.get("/ui/jobs", cookies=jar).text
    assert keyed.get("/models", cookies=jar).status_code == 401  # the API wants the header
    out = keyed.post("/ui/logout", cookies=jar)
    assert out.status_code == 303 and 'bsvm_ui=""' in out.headers["set-cookie"]


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/ui", "/models", "/ui/../x y"]
)
def test_the_form_returns_only_to_a_page(keyed, target):
    assert sign_in(keyed, KEYS[0], target).headers["location"] == "/ui"


def test_a_form_posted_from_another_site_is_refused(keyed):
    response = sign_in(keyed, KEYS[0], Origin="https://evil.example")
    assert response.status_code == 403 and "set-cookie" not in response.headers
    assert sign_in(keyed, KEYS[0], Origin="http://testserver").status_code == 303


def test_a_session_token_names_a_key_and_expires(tmp_path):
    settings = Settings(data_dir=tmp_path, api_keys=KEYS)
    token = new_token(KEYS[1], now=1000.0)
    assert token_is_valid(settings, token, now=1001.0)
    assert not token_is_valid(settings, token, now=1000.0 + SESSION_S)
    assert not token_is_valid(Settings(data_dir=tmp_path, api_keys=["other"]), token, now=1001.0)
    expires, mac = token.split(".")
    assert not token_is_valid(settings, f"{int(expires) + 60}.{mac}", now=1001.0)
    assert not token_is_valid(settings, f"{expires}.{'0' * 64}", now=1001.0)
    assert not token_is_valid(settings, "garbage", now=1001.0)
