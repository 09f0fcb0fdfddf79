"""The OpenAI Batch API of the stub server (`tests.stub_server.StubServer.batch`): `/v1/files` and `/v1/batches`.

`POST /v1/files` takes a multipart upload, `GET /v1/files/{id}` and `/v1/files/{id}/content` give it back;
`POST /v1/batches` creates a batch of an uploaded JSONL file, `GET /v1/batches/{id}` polls it. A batch is
`validating` on its first poll, `in_progress` until poll `complete_after`, then ends `outcome` ("completed", or
"failed" / "expired" to script those). When it ends, each line is answered as the chat endpoint would answer it:
the server's `answer` and `usage`, or the next queued `Fault` (a status other than 200 is a line of the error
file; a dropped connection an error line with no response). `bodies` keeps every request body sent in a batch.
"""

from __future__ import annotations

import json
import threading
from email.parser import BytesParser
from email.policy import HTTP
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.stub_server import StubServer

Reply = tuple[int, bytes]


class BatchDesk:
    """Files and batches held by one stub server; thread-safe."""

    def __init__(self, stub: StubServer) -> None:
        self.stub = stub
        self.complete_after = 2  # polls before a batch ends
        self.outcome = "completed"  # how batches end: completed, failed, expired
        self.files: dict[str, tuple[str, bytes]] = {}  # id -> (filename, content)
        self.batches: dict[str, dict[str, Any]] = {}  # id -> the batch object as last served
        self.polls: dict[str, int] = {}
        self.bodies: list[dict[str, Any]] = []  # every request body of every batch, in order
        self._lock = threading.Lock()

    def handles(self, path: str) -> bool:
        return "/files" in path or "/batches" in path

    def post(self, path: str, content_type: str, raw: bytes) -> Reply:
        if path.rstrip("/").endswith("/files"):
            return self._upload(content_type, raw)
        if path.rstrip("/").endswith("/batches"):
            return self._create(json.loads(raw))
        return 404, _error(f"no route for POST {path}")

    def get(self, path: str) -> Reply:
        parts = path.split("?")[0].rstrip("/").split("/")
        with self._lock:
            if parts[-1] == "content" and parts[-2] in self.files:
                return 200, self.files[parts[-2]][1]
            if parts[-1] in self.files:
                return 200, json.dumps(self._file_object(parts[-1])).encode()
        if parts[-2:-1] == ["batches"] and parts[-1] in self.batches:
            return 200, json.dumps(self._poll(parts[-1])).encode()
        return 404, _error(f"no route for GET {path}")

    def _upload(self, content_type: str, raw: bytes) -> Reply:
        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        fields = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()}
        if "file" not in fields or fields.get("purpose") is None:
            return 400, _error("a file and a purpose are required")
        with self._lock:
            file_id = f"file-stub{len(self.files) + 1}"
            content = fields["file"].get_payload(decode=True)
            self.files[file_id] = (str(fields["file"].get_filename()), content if isinstance(content, bytes) else b"")
            return 200, json.dumps(self._file_object(file_id)).encode()

    def _file_object(self, file_id: str) -> dict[str, Any]:
        name, content = self.files[file_id]
        return {"id": file_id, "object": "file", "bytes": len(content), "created_at": 0, "filename": name} | {
            "purpose": "batch",
            "status": "processed",
        }

    def _create(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if body.get("input_file_id") not in self.files:
                return 400, _error(f"no file {body.get('input_file_id')!r}")
            batch_id = f"batch_stub{len(self.batches) + 1}"
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body.get("endpoint"),
                "completion_window": body.get("completion_window"),
                "input_file_id": body["input_file_id"],
                "metadata": body.get("metadata"),
                "created_at": 0,
                "status": "validating",
            }
            self.polls[batch_id] = 0
            return 200, json.dumps(self.batches[batch_id]).encode()

    def _poll(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self.batches[batch_id]
            if batch["status"] in ("completed", "failed", "expired"):
                return batch
            self.polls[batch_id] += 1
            lines = self.files[batch["input_file_id"]][1].decode().splitlines()
            if self.polls[batch_id] < self.complete_after:
                status = "validating" if self.polls[batch_id] == 1 else "in_progress"
                batch |= {"status": status, "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
                return batch
        return self._end(batch, [json.loads(line) for line in lines])

    def _end(self, batch: dict[str, Any], requests: list[dict[str, Any]]) -> dict[str, Any]:
        if self.outcome == "failed":
            reasons = [{"code": "invalid_request", "message": "line 1: the model stub-x does not exist", "line": 1}]
            with self._lock:
                batch |= {"status": "failed", "errors": {"object": "list", "data": reasons}}
            return batch
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        answered = requests if self.outcome == "completed" else requests[: len(requests) // 2]
        for request in answered:
            line, ok = self._answer_line(request)
            (outputs if ok else errors).append(line)
        with self._lock:
            batch["status"] = self.outcome
            batch["request_counts"] = {"total": len(requests), "completed": len(outputs), "failed": len(errors)}
            for key, lines in (("output_file_id", outputs), ("error_file_id", errors)):
                if lines:
                    file_id = f"file-stub{len(self.files) + 1}"
                    self.files[file_id] = (f"{key}.jsonl", "".join(json.dumps(x) + "\n" for x in lines).encode())
                    batch[key] = file_id
            return batch

    def _answer_line(self, request: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The output-file line of one request, and whether it belongs in the output file (else the error file)."""
        body = request["body"]
        with self.stub._lock:
            self.bodies.append(body)
            fault = self.stub.faults.popleft() if self.stub.faults else None
        line: dict[str, Any] = {"id": f"batch_req_{len(self.bodies)}", "custom_id": request["custom_id"]}
        if fault is None or (fault.status == 200 and not fault.body and not fault.drop):
            reply = json.loads(self.stub._completion(body))
            return line | {"response": {"status_code": 200, "body": reply}, "error": None}, True
        if fault.drop:
            return line | {"response": None, "error": {"code": "server_error", "message": "no response"}}, False
        try:
            reply = json.loads(fault.body)
        except ValueError:
            reply = fault.body.decode(errors="replace")
        return line | {"response": {"status_code": fault.status, "body": reply}, "error": None}, fault.status == 200


def _error(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "stub_error", "code": "invalid_request"}}).encode()
