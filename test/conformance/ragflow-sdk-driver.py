"""RAGFlow's Python SDK, driven against an Easel server: every SDK call Easel supports.

Reads its configuration as JSON on stdin:
    {"base_url", "api_key", "other_api_key", "corpus", "suffix", "agents": {"echo": dsl, "triage": dsl}}
and prints one JSON object on stdout: what each call returned (or the message of the exception
the SDK raised), and how each stock template of the corpus fared when imported. It asserts
nothing itself: test/conformance/ragflow-sdk.test.ts does.
"""

import glob
import json
import os
import sys

from ragflow_sdk import RAGFlow

# The SDK's dataset calls (datasets, documents, chunks, retrieval): Easel has no datasets yet.
# Listed so that they are added here, with their checks, when it does; not called today.
DATASET_CALLS_LATER = [
    "RAGFlow.create_dataset",
    "RAGFlow.list_datasets",
    "RAGFlow.get_dataset",
    "RAGFlow.delete_datasets",
    "DataSet.update",
    "DataSet.upload_documents",
    "DataSet.list_documents",
    "DataSet.delete_documents",
    "DataSet.async_parse_documents",
    "DataSet.async_cancel_parse_documents",
    "Document.update",
    "Document.download",
    "Document.add_chunk",
    "Document.list_chunks",
    "Document.delete_chunks",
    "Chunk.update",
    "RAGFlow.retrieve",
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

    # ---- deletes --------------------------------------------------------------------------
    call("delete_sessions (ids)", lambda: echo.delete_sessions(ids=[named["id"]]))
    call("list_sessions (after delete)", lambda: sorted(s.id for s in echo.list_sessions()))
    call("delete_sessions (ids, not the agent's)", lambda: echo.delete_sessions(ids=["f" * 32]))
    call("delete_sessions (delete_all)", lambda: echo.delete_sessions(delete_all=True))
    call("list_sessions (after delete_all)", lambda: [s.id for s in echo.list_sessions()])
    call("delete_agent", lambda: rag.delete_agent(echo_id))
    call("get_agent (deleted)", lambda: rag.get_agent(echo_id))
    call("delete_agent (second)", lambda: rag.delete_agent(triage_id))

    print(json.dumps({"calls": calls, "templates": import_templates(config, suffix), "dataset_calls_later": DATASET_CALLS_LATER}))


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
