"""The HTTP corpus: requests with the status the contract gives them, run against the sandbox
over real HTTP on 127.0.0.1 and checked against the OpenAPI document.

A case file (``http/*.yaml``) is a list of cases::

    - id: settings-temp-above-one        # unique in its file; the test id is FILE/ID
      about: contract 2.1, temp is 0 to 1  # why the case exists (optional)
      setup: [REQUEST, ...]              # sent first, each must succeed (optional)
      request:                           # REQUEST: the request under test
        method: POST
        path: /update-chatbot-settings   # below /api/v1
        query: {name: value}             # optional
        json: {chatbotId: bot-1, temp: 1.5}   # or raw: "text" (sent as is), optional
        content_type: application/json   # the default when there is a body
        key: standard                    # standard | hobby | free | none | wrong
      status: 400                        # what the contract (or a documented sandbox choice) says
      message: Invalid request data      # optional: the body's "message", exactly
      limited: true                      # on a rate-limited sandbox, after one request spent
      openapi_request:                   # only where the document's verdict on the request
        expect: valid                    # differs from the sandbox's, with why
        because: "..."

Against the OpenAPI document every case checks that the operation and the status are
documented, that a JSON response matches the documented schema, and that the request is valid
under the document exactly when the sandbox took it (anything but a 400 `Invalid request
data`/`Invalid request body`), unless ``openapi_request`` records why not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import jsonschema
import referencing
import referencing.jsonschema
import yaml
from pydantic import BaseModel, ConfigDict, Field

from botctl import contract

HERE = Path(__file__).parent
OPENAPI = HERE.parents[1] / "schemas" / "chatbot-api-v1.openapi.yaml"
WORLD = HERE / "http_world.yaml"
KEYS = {"standard": "std-key", "hobby": "hobby-key", "free": "free-key", "wrong": "no-such-key"}
EXTRA_MODELS = ("gpt-9-preview",)
EXTRA_SOURCES = ("WhatsApp",)
REFUSALS = (contract.MSG_INVALID_DATA, contract.MSG_INVALID_BODY)
_METHODS = ("get", "post", "put", "patch", "delete")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Request(_Strict):
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: str = Field(pattern=r"^/")
    query: dict[str, str] = Field(default_factory=dict)
    body: Any = Field(default=None, alias="json")
    raw: str | None = None
    content_type: str = "application/json"
    key: Literal["standard", "hobby", "free", "none", "wrong"] = "standard"

    @property
    def has_body(self) -> bool:
        return self.body is not None or self.raw is not None

    def content(self) -> bytes | None:
        if self.raw is not None:
            return self.raw.encode()
        return None if self.body is None else json.dumps(self.body).encode()

    def headers(self) -> dict[str, str]:
        headers = {} if self.key == "none" else {"Authorization": f"Bearer {KEYS[self.key]}"}
        if self.has_body:
            headers["Content-Type"] = self.content_type
        return headers


class Override(_Strict):
    expect: Literal["valid", "invalid"]
    because: str = Field(min_length=20)


class HttpCase(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    about: str = ""
    setup: tuple[Request, ...] = ()
    request: Request
    status: int
    message: str | None = None
    limited: bool = False
    openapi_request: Override | None = None


def load_cases(folder: Path = HERE / "http") -> list[tuple[str, HttpCase]]:
    cases: list[tuple[str, HttpCase]] = []
    for file in sorted(folder.glob("*.yaml")):
        items = yaml.safe_load(file.read_text(encoding="utf-8"))
        ids = [item.get("id") for item in items]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        assert not duplicates, f"{file.name}: duplicate case ids {duplicates}"
        cases += [(f"{file.stem}/{item['id']}", HttpCase.model_validate(item)) for item in items]
    return cases


@dataclass(frozen=True)
class Answer:
    """What the sandbox answered: status, content type and body (JSON when it is JSON)."""

    status: int
    content_type: str
    body: Any

    @property
    def message(self) -> str | None:
        return self.body.get("message") if isinstance(self.body, dict) else None

    @property
    def refused_request(self) -> bool:
        """The sandbox judged the request itself malformed (contract 7: 400)."""
        return self.status == 400 and self.message in REFUSALS


def send(client: httpx.Client, request: Request) -> Answer:
    response = client.request(
        request.method,
        request.path.lstrip("/"),
        params=request.query,
        content=request.content(),
        headers=request.headers(),
    )
    ctype = response.headers.get("content-type", "").split(";")[0].strip()
    body: Any = response.text
    if ctype == "application/json":
        body = response.json()
    return Answer(response.status_code, ctype, body)


def judge_sandbox(case: HttpCase, answer: Answer) -> list[str]:
    problems = []
    if answer.status != case.status:
        problems.append(f"sandbox: expected {case.status}, got {answer.status}: {answer.body!r}")
    if case.message is not None and answer.message != case.message:
        problems.append(f"sandbox: expected message {case.message!r}, got {answer.message!r}")
    return problems


# -- the OpenAPI document -------------------------------------------------------------------


def _strict_json(text: str) -> Any:
    """RFC 8259 JSON: Python's json also reads NaN and Infinity, which JSON does not have."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class Operation:
    template: str
    method: str
    spec: dict[str, Any]
    pointer: str  # JSON pointer of the operation in the document


class OpenApi:
    """The document, with what the checks need: operations by request, schemas by pointer."""

    URI = "urn:botctl:openapi"

    def __init__(self, path: Path = OPENAPI) -> None:
        self.doc: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
        resource = referencing.Resource.from_contents(
            self.doc, default_specification=referencing.jsonschema.DRAFT202012
        )
        self.registry: referencing.Registry[Any] = referencing.Registry().with_resource(
            self.URI, resource
        )

    def operation(self, method: str, path: str) -> Operation | None:
        for template, item in self.doc["paths"].items():
            pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
            if re.match(pattern, path) and method.lower() in item:
                pointer = f"/paths/{_escape(template)}/{method.lower()}"
                return Operation(template, method.lower(), item[method.lower()], pointer)
        return None

    def resolve(self, value: dict[str, Any], pointer: str) -> tuple[dict[str, Any], str]:
        """Follow a (non-schema) `$ref` such as a shared response or parameter."""
        while "$ref" in value:
            pointer = value["$ref"].removeprefix("#")
            value = self.doc
            for part in pointer.strip("/").split("/"):
                value = value[part.replace("~1", "/").replace("~0", "~")]
        return value, pointer

    def errors(self, pointer: str, instance: Any) -> list[str]:
        validator = jsonschema.Draft202012Validator(
            {"$ref": f"{self.URI}#{pointer}"},
            registry=self.registry,
            format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
        )
        return [
            f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
            for e in validator.iter_errors(instance)
        ]

    def parameters(self, op: Operation) -> list[tuple[dict[str, Any], str]]:
        item_pointer = op.pointer.rsplit("/", 1)[0]
        item = self.doc["paths"][op.template]
        found = []
        for owner, base in ((item, item_pointer), (op.spec, op.pointer)):
            for i, param in enumerate(owner.get("parameters", [])):
                found.append(self.resolve(param, f"{base}/parameters/{i}"))
        return found

    def request_problems(self, op: Operation, request: Request) -> list[str]:
        """Why the document would refuse ``request`` (empty: it is valid under it)."""
        problems: list[str] = []
        params = {p["name"]: (p, ptr) for p, ptr in self.parameters(op) if p["in"] == "query"}
        for name in request.query:
            if name not in params:
                problems.append(f"query parameter {name!r} is not documented")
        for name, (param, pointer) in params.items():
            if name not in request.query:
                if param.get("required"):
                    problems.append(f"query parameter {name!r} is required")
                continue
            raw = request.query[name]
            value: Any = raw
            if param["schema"].get("type") == "integer" and re.fullmatch(r"-?[0-9]+", raw):
                value = int(raw)
            problems += [f"query {name}: {e}" for e in self.errors(f"{pointer}/schema", value)]
        problems += self._body_problems(op, request)
        return problems

    def _body_problems(self, op: Operation, request: Request) -> list[str]:
        body_spec = op.spec.get("requestBody")
        if body_spec is None:
            return ["a body is sent, but the operation takes none"] if request.has_body else []
        if not request.has_body:
            return ["the request body is required"] if body_spec.get("required") else []
        if request.content_type not in body_spec["content"]:
            return [f"content type {request.content_type!r} is not documented"]
        try:
            raw = request.raw if request.raw is not None else json.dumps(request.body)
            instance = _strict_json(raw)
        except ValueError as exc:
            return [f"the body is not JSON: {exc}"]
        media = _escape(request.content_type)
        pointer = f"{op.pointer}/requestBody/content/{media}/schema"
        return [f"body {e}" for e in self.errors(pointer, instance)]

    def response_problems(self, op: Operation, answer: Answer) -> list[str]:
        responses = op.spec["responses"]
        status = str(answer.status)
        if status not in responses:
            return [f"status {status} is not documented for {op.method.upper()} {op.template}"]
        response, pointer = self.resolve(responses[status], f"{op.pointer}/responses/{status}")
        content = response.get("content", {})
        if answer.content_type not in content:
            return [f"response content type {answer.content_type!r} is not documented"]
        if (
            answer.content_type != "application/json"
            or "schema" not in content[answer.content_type]
        ):
            return []
        schema = f"{pointer}/content/{_escape(answer.content_type)}/schema"
        return [f"response {e}" for e in self.errors(schema, answer.body)]


def judge_openapi(case: HttpCase, answer: Answer, api: OpenApi) -> list[str]:
    op = api.operation(case.request.method, case.request.path)
    if op is None:
        return [f"OpenAPI: {case.request.method} {case.request.path} is not documented"]
    return api.response_problems(op, answer) + judge_request(case, answer, api)


def judge_request(case: HttpCase, answer: Answer, api: OpenApi) -> list[str]:
    """The document refuses the request exactly when the sandbox did, or says why not."""
    op = api.operation(case.request.method, case.request.path)
    assert op is not None
    request = api.request_problems(op, case.request)
    taken = not answer.refused_request
    if case.openapi_request is not None and (case.openapi_request.expect == "valid") == taken:
        return ["openapi_request repeats the verdict the sandbox's answer implies"]
    expected = (case.openapi_request.expect == "valid") if case.openapi_request else taken
    if (not request) == expected:
        return []
    verdict = "valid" if expected else "invalid"
    why = f" ({case.openapi_request.because})" if case.openapi_request else ""
    return [
        f"OpenAPI: the request should be {verdict} under the document{why} "
        f"(sandbox: {answer.status} {answer.message!r}); document says: {request or 'valid'}"
    ]
