"""RAGFlow's Python SDK, driven against an Easel server: every SDK call Easel supports.

Reads its configuration as JSON on stdin:
    {"base_url", "api_key", "other_api_key", "corpus", "suffix", "agents": {"echo": dsl, "triage": dsl},
     "documents": {"guide.md": text, "faq.txt": text, "broken.pdf": text (latin-1)}}
and prints one JSON object on stdout: what each call returned (or the message of the exception
the SDK raised), how each stock template of the corpus fared when imported, and the SDK's
dataset calls Easel does not serve, with why. It asserts
nothing itself: test/conformance/ragflow-sdk.test.ts does.
"""

import glob
import json
import os
import sys

from ragflow_sdk import RAGFlow
from ragflow_sdk.modules.dataset import DataSet

# The SDK's dataset calls Easel does not serve, each with why (the others are made below).
DATASET_CALLS_LATER = [
    {"call": "Document.update", "why": "documents are not renamed, re-configured or given metadata: upload again instead"},
    {"call": "Document.download", "why": "the knowledge service keeps a document's text and chunks, not a download of its file"},
    {"call": "Document.add_chunk", "why": "chunks are what parsing makes; a hand-made chunk would be lost at the next parse"},
    {"call": "Document.delete_chunks", "why": "as add_chunk: delete the document, or parse it again"},
    {"call": "Chunk.update", "why": "as add_chunk: edit the document and upload it again"},
]


def main():
    config = json.load(sys.stdin)
    rag = RAGFlow(api_key=config["api_key"], base_url=config["base_url"])
    suffix = config["suffix"]
    calls = []

    def call(name, fn):
        """Runs one SDK call; records what it returned, or the message it raised."""
        try:
            value = fn()
            calls.append({"call": name, "ok": True, "value": value})
            return value
        except Exception as error:  # the SDK raises Exception(message) for any refusal
            calls.append({"call": name, "ok": False, "error": str(error)})
            return None

    def agent_fields(agent):
        return {"id": agent.id, "title": getattr(agent, "title", None), "description": agent.description, "canvas_type": agent.canvas_type}

    def session_fields(session):
        return {"id": session.id, "name": session.name, "user_id": getattr(session, "user_id", None), "agent_id": session.agent_id}

    def mine(agents):
        return [agent_fields(a) for a in agents if (getattr(a, "title", "") or "").endswith(suffix)]

    # ---- agents ---------------------------------------------------------------------------
    echo_title = f"Echo {suffix}"
    triage_title = f"Triage {suffix}"
    call("create_agent", lambda: rag.create_agent(title=echo_title, dsl=config["agents"]["echo"], description="Says it back", canvas_type="Agent"))
    call("create_agent (second)", lambda: rag.create_agent(title=triage_title, dsl=config["agents"]["triage"]))
    call("create_agent (title taken, other case)", lambda: rag.create_agent(title=echo_title.upper(), dsl=config["agents"]["echo"]))
    listed = call("list_agents", lambda: mine(rag.list_agents())) or []
    call("list_agents (page_size=1, oldest first)", lambda: [agent_fields(a) for a in rag.list_agents(page=1, page_size=1, orderby="create_time", desc=False)])
    call("list_agents (page 2 of 1, newest first)", lambda: [agent_fields(a) for a in rag.list_agents(page=2, page_size=1, orderby="create_time", desc=True)])
    # the filters the SDK's list_agents does not take, through its own transport
    call("GET /agents?keywords&canvas_type", lambda: rag.get("/agents", {"keywords": f"echo {suffix}".upper(), "canvas_type": "Agent"}).json())
    ids = {a["title"]: a["id"] for a in listed}
    echo_id = ids.get(echo_title)
    triage_id = ids.get(triage_title)

    def got(agent):
        return {**agent_fields(agent), "components": sorted(k for k in vars(agent.dsl.components) if k != "rag")}

    call("get_agent", lambda: got(rag.get_agent(echo_id)))
    renamed = f"Echo renamed {suffix}"
    call("update_agent", lambda: rag.update_agent(echo_id, title=renamed, description="Says it back, renamed", canvas_type="Other"))
    call("get_agent (after update)", lambda: agent_fields(rag.get_agent(echo_id)))
    call("update_agent (title taken)", lambda: rag.update_agent(triage_id, title=renamed.lower()))
    call("update_agent (DSL)", lambda: rag.update_agent(echo_id, dsl=config["agents"]["echo"]))

    # ---- sessions -------------------------------------------------------------------------
    echo = rag.get_agent(echo_id) if echo_id else None
    named = call("create_session (name, user_id)", lambda: session_fields(echo.create_session(name="Support chat", user_id="user-1")))
    call("create_session", lambda: session_fields(echo.create_session()))
    call("list_sessions", lambda: [session_fields(s) for s in echo.list_sessions()])
    call("list_sessions (page_size=1, oldest first)", lambda: [session_fields(s) for s in echo.list_sessions(page=1, page_size=1, orderby="create_time", desc=False)])
    call("list_sessions (id)", lambda: [session_fields(s) for s in echo.list_sessions(id=named["id"])])

    # ---- ask ------------------------------------------------------------------------------
    session = echo.create_session(name="Ask") if echo else None
    call("ask (stream=False)", lambda: [m.content for m in session.ask("hello there", stream=False)])

    def streamed(question):
        shown, cont = "", ""
        contents = []
        for ans in session.ask(question, stream=True):
            contents.append(ans.content)
            # RAGFlow's documented way to print a streamed answer
            shown += ans.content[len(cont):]
            cont = ans.content
        return {"contents": contents, "shown": shown}

    call("ask (stream=True)", lambda: streamed("and again"))
    triage = rag.get_agent(triage_id) if triage_id else None
    inputs = {"customer": {"type": "line", "value": "Grace"}, "tier": {"type": "options", "value": "gold"}}
    call("ask (stream=False, inputs)", lambda: [m.content for m in triage.create_session().ask("I want a refund please", stream=False, inputs=inputs)])

    # text sent while a form waits: the answer carries Easel's notice, which the SDK passes over
    call("create_agent (form)", lambda: rag.create_agent(title=f"Form {suffix}", dsl=config["agents"]["form"]))
    form = next((a for a in rag.list_agents(page_size=100) if getattr(a, "title", None) == f"Form {suffix}"), None)
    waiting = form.create_session() if form else None
    call("ask (form waits)", lambda: [m.content for m in waiting.ask("hello", stream=False)])
    call("ask (stream=False, form waits, text)", lambda: [m.content for m in waiting.ask("what is this form?", stream=False)])
    call("ask (stream=True, form waits, text)", lambda: [m.content for m in waiting.ask("and now?", stream=True)])
    call("POST /agents/chat/completions (form waits, text)", lambda: rag.post("/agents/chat/completions", {"agent_id": form.id, "session_id": waiting.id, "query": "still?", "stream": False}).json())
    call("ask (stream=False, form answered)", lambda: [m.content for m in waiting.ask("", stream=False, inputs={"name": {"type": "line", "value": "Ada"}})])
    call("delete_agent (form)", lambda: rag.delete_agent(form.id))

    # ---- deletes --------------------------------------------------------------------------
    call("delete_sessions (ids)", lambda: echo.delete_sessions(ids=[named["id"]]))
    call("list_sessions (after delete)", lambda: sorted(s.id for s in echo.list_sessions()))
    call("delete_sessions (ids, not the agent's)", lambda: echo.delete_sessions(ids=["f" * 32]))
    call("delete_sessions (delete_all)", lambda: echo.delete_sessions(delete_all=True))
    call("list_sessions (after delete_all)", lambda: [s.id for s in echo.list_sessions()])
    call("delete_agent", lambda: rag.delete_agent(echo_id))
    call("get_agent (deleted)", lambda: rag.get_agent(echo_id))
    call("delete_agent (second)", lambda: rag.delete_agent(triage_id))

    datasets(config, call)
    print(json.dumps({"calls": calls, "templates": import_templates(config, suffix), "dataset_calls_later": DATASET_CALLS_LATER}))


def datasets(config, call):
    """The dataset calls: datasets, documents, parsing, chunks and retrieval, and their refusals."""
    rag = RAGFlow(api_key=config["api_key"], base_url=config["base_url"])
    other = RAGFlow(api_key=config["other_api_key"], base_url=config["base_url"])
    suffix = config["suffix"]
    docs = config["documents"]

    def dataset_fields(d):
        parser = d.parser_config.to_json() if d.parser_config is not None else None
        return {"id": d.id, "name": d.name, "description": d.description, "chunk_method": d.chunk_method, "parser_config": parser, "document_count": d.document_count, "chunk_count": d.chunk_count, "permission": d.permission}

    def doc_fields(d):
        return {"id": d.id, "name": d.name, "dataset_id": d.dataset_id, "run": d.run, "progress": d.progress, "progress_msg": d.progress_msg, "chunk_count": d.chunk_count, "token_count": d.token_count, "size": d.size, "type": d.type}

    def chunk_fields(c):
        return {"id": c.id, "content": c.content, "document_id": c.document_id, "dataset_id": c.dataset_id, "document_name": c.document_name, "similarity": c.similarity}

    name = f"Manuals {suffix}"
    parser_config = DataSet.ParserConfig(rag, {"chunk_token_num": 128, "delimiter": "\n"})
    created = call("create_dataset", lambda: dataset_fields(rag.create_dataset(name=name, description="Product manuals", chunk_method="naive", parser_config=parser_config)))
    call("create_dataset (second)", lambda: dataset_fields(rag.create_dataset(name=f"Notes {suffix}")))
    call("create_dataset (chunk_method=book)", lambda: rag.create_dataset(name=f"Book {suffix}", chunk_method="book"))
    call("create_dataset (chunk_method=unknown)", lambda: rag.create_dataset(name=f"Odd {suffix}", chunk_method="poetry"))
    call("create_dataset (empty name)", lambda: rag.create_dataset(name=""))
    ds_id = (created or {}).get("id")
    call("list_datasets", lambda: [dataset_fields(d) for d in rag.list_datasets()])
    call("list_datasets (page_size=1, oldest first)", lambda: [d.name for d in rag.list_datasets(page=1, page_size=1, orderby="create_time", desc=False)])
    call("list_datasets (page 2 of 1, newest first)", lambda: [d.name for d in rag.list_datasets(page=2, page_size=1)])
    call("list_datasets (name)", lambda: [d.id for d in rag.list_datasets(name=name)])
    call("list_datasets (id)", lambda: [d.name for d in rag.list_datasets(id=ds_id)])
    call("list_datasets (id, missing)", lambda: other.list_datasets(id="f" * 32))
    call("list_datasets (id, another tenant's)", lambda: other.list_datasets(id=ds_id))
    call("get_dataset", lambda: rag.get_dataset(name=name).id)
    dataset = rag.list_datasets(id=ds_id)[0] if ds_id else None
    call("DataSet.update", lambda: dataset_fields(dataset.update({"name": f"Manuals renamed {suffix}", "parser_config": {"chunk_token_num": 64}})))
    call("DataSet.update (chunk_method=qa)", lambda: dataset.update({"chunk_method": "qa"}))
    call("DataSet.update (parser_config.raptor)", lambda: dataset.update({"parser_config": {"raptor": {"use_raptor": True}}}))

    uploaded = call("upload_documents", lambda: [doc_fields(d) for d in dataset.upload_documents([{"display_name": n, "blob": docs[n].encode("latin-1")} for n in ("guide.md", "faq.txt", "broken.pdf")])]) or []
    call("upload_documents (unsupported type)", lambda: dataset.upload_documents([{"display_name": "clip.mp4", "blob": b"\x00\x00\x00 ftypisom"}]))
    call("upload_documents (another tenant's dataset)", lambda: DataSet(other, {"id": ds_id}).upload_documents([{"display_name": "x.txt", "blob": b"x"}]))
    ids = {d["name"]: d["id"] for d in uploaded}
    call("list_documents", lambda: sorted((d.name, d.run) for d in dataset.list_documents()))
    call("list_documents (keywords)", lambda: [d.name for d in dataset.list_documents(keywords="guide")])
    call("async_parse_documents", lambda: dataset.async_parse_documents([ids.get("guide.md"), ids.get("broken.pdf")]))
    call("list_documents (after async_parse_documents)", lambda: {d.name: doc_fields(d) for d in dataset.list_documents()})
    call("parse_documents", lambda: sorted(dataset.parse_documents([ids.get("faq.txt")])))
    call("async_cancel_parse_documents (parsed)", lambda: dataset.async_cancel_parse_documents([ids.get("faq.txt")]))
    call("async_parse_documents (missing)", lambda: dataset.async_parse_documents(["e" * 32]))
    guide = next((d for d in dataset.list_documents(id=ids.get("guide.md"))), None) if ids.get("guide.md") else None
    call("Document.list_chunks", lambda: [chunk_fields(c) for c in guide.list_chunks()])
    call("Document.list_chunks (keywords)", lambda: [c.content for c in guide.list_chunks(keywords="warranty")])
    call("retrieve", lambda: [chunk_fields(c) for c in rag.retrieve(dataset_ids=[ds_id], question="How long is the warranty?", similarity_threshold=0.0)])
    call("retrieve (document_ids)", lambda: sorted({c.document_id for c in rag.retrieve(dataset_ids=[ds_id], document_ids=[ids.get("faq.txt")], question="warranty refund", similarity_threshold=0.0)}))
    call("retrieve (rerank_id)", lambda: rag.retrieve(dataset_ids=[ds_id], question="warranty", rerank_id="bge-reranker@BAAI"))
    call("retrieve (keyword)", lambda: rag.retrieve(dataset_ids=[ds_id], question="warranty", keyword=True))
    call("retrieve (another tenant's dataset)", lambda: other.retrieve(dataset_ids=[ds_id], question="warranty"))
    call("retrieve (missing dataset)", lambda: other.retrieve(dataset_ids=["f" * 32], question="warranty"))
    call("delete_documents", lambda: dataset.delete_documents(ids=[ids.get("faq.txt")]))
    call("retrieve (after delete_documents)", lambda: sorted({c.document_id for c in rag.retrieve(dataset_ids=[ds_id], question="warranty refund", similarity_threshold=0.0)}))
    call("delete_documents (missing)", lambda: dataset.delete_documents(ids=["e" * 32]))
    call("delete_datasets (another tenant's)", lambda: other.delete_datasets(ids=[ds_id]))
    call("delete_datasets", lambda: rag.delete_datasets(ids=[ds_id]))
    call("list_datasets (after delete_datasets)", lambda: [d.name for d in rag.list_datasets()])
    call("delete_datasets (delete_all)", lambda: rag.delete_datasets(delete_all=True))
    call("list_datasets (after delete_all)", lambda: [d.name for d in rag.list_datasets()])


def english(value):
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return value.get("en") or next((v for v in value.values() if isinstance(v, str)), None)
    return None


def import_templates(config, suffix):
    """Every stock template, through create_agent (one tenant) and as the file itself (another)."""
    rag = RAGFlow(api_key=config["api_key"], base_url=config["base_url"])
    other = RAGFlow(api_key=config["other_api_key"], base_url=config["base_url"])
    out = []
    for path in sorted(glob.glob(os.path.join(config["corpus"], "agent", "templates", "*.json"))):
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            template = json.load(f)
        wrapped = isinstance(template.get("dsl"), dict)
        dsl = template["dsl"] if wrapped else template
        title = f"{english(template.get('title')) or name[:-5]} [{name[:-5]} {suffix}]"
        entry = {"file": name}
        try:
            rag.create_agent(title=title, dsl=dsl, description=english(template.get("description")), canvas_type=template.get("canvas_type"))
            entry["sdk"] = {"ok": True}
        except Exception as error:
            entry["sdk"] = {"ok": False, "error": str(error)}
        body = template if wrapped else {"title": name[:-5], "dsl": template}
        res = other.post("/agents", body).json()
        entry["file_as_is"] = {"ok": res.get("code") == 0, "title": (res.get("data") or {}).get("title") if res.get("code") == 0 else None, "canvas_type": (res.get("data") or {}).get("canvas_type") if res.get("code") == 0 else None, "error": res.get("message")}
        out.append(entry)
    return out


if __name__ == "__main__":
    main()
