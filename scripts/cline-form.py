#!/usr/bin/env python3
"""Rewrite agent sessions with OpenAI tool calls into the form Cline and Roo
Code send: each call an XML tag in assistant text (one call a message), its
output sent back in a user message as text blocks (`[TOOL for 'ARG'] Result:`,
the output, an <environment_details> block), user turns wrapped in <task> /
<feedback>. For measuring a dialect the corpus lacks (docs/benchmarks.md):

    python3 scripts/cline-form.py ../shared/corpus/coding_agent_sessions.jsonl > cline.jsonl
"""
import json, sys, re

NAMES = {"Read": ("read_file", "path", ["file_path", "path"]),
         "Write": ("write_to_file", "path", ["file_path", "path"]),
         "Edit": ("replace_in_file", "path", ["file_path", "path"]),
         "Bash": ("execute_command", "command", ["command"]),
         "exec_command": ("execute_command", "command", ["cmd", "command"]),
         "shell_command": ("execute_command", "command", ["command"]),
         "Grep": ("search_files", "regex", ["pattern"]),
         "Glob": ("list_files", "path", ["pattern", "path"]),
         "apply_patch": ("apply_diff", "path", ["input"])}

def env(files, turn):
    listing = "\n".join(sorted(files)[:60])
    return ("<environment_details>\n# VSCode Visible Files\n" + (sorted(files)[-1] if files else "(none)") +
            "\n\n# VSCode Open Tabs\n" + "\n".join(sorted(files)[-5:]) +
            f"\n\n# Current Time\n11/28/2026, {9 + turn // 60:02d}:{turn % 60:02d}:00 AM (UTC)\n\n"
            "# Current Working Directory (/repo) Files\n" + listing + "\n\n# Current Mode\nACT MODE\n</environment_details>")

def convert(conv):
    out, files, turn = [], set(), 0
    calls = {}
    msgs = conv["messages"]
    i = 0
    first_user = True
    while i < len(msgs):
        m = msgs[i]
        role = m.get("role")
        text = m.get("content") if isinstance(m.get("content"), str) else ""
        if role == "system":
            out.append(m); i += 1; continue
        if role == "user":
            turn += 1
            t = f"<task>\n{text}\n</task>" if first_user else f"<feedback>\n{text}\n</feedback>"
            first_user = False
            out.append({"role": "user", "content": [{"type": "text", "text": t}, {"type": "text", "text": env(files, turn)}]})
            i += 1; continue
        if role == "assistant":
            tcs = m.get("tool_calls") or []
            if not tcs:
                out.append({"role": "assistant", "content": [{"type": "text", "text": text or "(no text)"}]})
                i += 1; continue
            # results follow
            results = {}
            j = i + 1
            while j < len(msgs) and msgs[j].get("role") == "tool":
                results[msgs[j].get("tool_call_id")] = msgs[j].get("content") if isinstance(msgs[j].get("content"), str) else json.dumps(msgs[j].get("content"))
                j += 1
            for k, tc in enumerate(tcs):
                name = tc["function"]["name"]
                try:
                    args = json.loads(tc["function"]["arguments"] or "{}")
                except Exception:
                    args = {}
                cname, key, srcs = NAMES.get(name, ("use_mcp_tool", "tool_name", []))
                arg = next((str(args[s]) for s in srcs if s in args), name)
                if key == "path" and "/" in arg:
                    files.add(arg)
                body = "\n".join(f"<{a}>{json.dumps(v) if not isinstance(v, str) else v}</{a}>" for a, v in args.items())
                pre = (text + "\n\n") if (k == 0 and text) else ""
                out.append({"role": "assistant", "content": [{"type": "text", "text": f"{pre}<{cname}>\n{body}\n</{cname}>"}]})
                res = results.get(tc.get("id"), "(no output)")
                if cname == "execute_command":
                    res = "Command executed.\nOutput:\n" + res
                turn += 1
                short = arg.replace("'", "")[:120].split("\n")[0]
                out.append({"role": "user", "content": [
                    {"type": "text", "text": f"[{cname} for '{short}'] Result:"},
                    {"type": "text", "text": res},
                    {"type": "text", "text": env(files, turn)}]})
            i = j
            continue
        i += 1
    # merge consecutive same-role messages (user feedback after a result)
    merged = []
    for m in out:
        if merged and merged[-1]["role"] == m["role"] and m["role"] != "system":
            merged[-1]["content"] = merged[-1]["content"] + m["content"]
        else:
            merged.append(m)
    return {"id": conv["id"] + "-cline", "messages": merged}

for l in open(sys.argv[1]):
    print(json.dumps(convert(json.loads(l))))
