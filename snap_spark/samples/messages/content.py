"""What honest SNAP messages of a sample say: relays, prompts, artifacts, task reports, ids.

The words are fixed tables (multilingual, with emoji and characters JSON escapes); every
choice among them, and every id, is drawn from the sample's ``random.Random``.
"""

from __future__ import annotations

import random
import time
from typing import Any, Final

from snap_spark.samples.messages.agents import Agent
from snap_spark.samples.messages.records import Step

__all__ = [
    "ARTIFACT_NAMES",
    "FAILURES",
    "FOLLOW_UPS",
    "GATEWAYS",
    "PROGRESS_TEXT",
    "PROMPTS",
    "QUESTIONS",
    "RELAYS",
    "SERVICES",
    "SERVICE_CALLS",
    "STRING_MESSAGE_SHARE",
    "UNSIGNED_SHARE",
    "Content",
    "iso",
    "random_token",
    "random_uuid",
]

UNSIGNED_SHARE: Final = 0.15  # responses and events sent without sig
STRING_MESSAGE_SHARE: Final = 0.02  # envelopes whose "message" is JSON text
_UUID_CLEAR: Final = ~((0xF << 76) | (0xC << 60))  # version nibble, variant bits
_UUID_SET: Final = (0x4 << 76) | (0x8 << 60)

RELAYS: Final = (
    "wss://relay.damus.io",
    "wss://nos.lol",
    "wss://relay.primal.net",
    "wss://relay.snort.social",
)
GATEWAYS: Final = (
    "https://agents.acme.example/snap",
    "https://gw.snap-mesh.example/inbox",
    "wss://stream.snap-mesh.example/ws",
    "kafka://snap-ingress/agents",
)
SERVICES: Final = (
    "https://api.ledger.example/snap",
    "https://db.analytics.example/snap",
    "https://weather.example/snap",
)
PROMPTS: Final = (
    "Write a login form in React",
    "Summarise the attached quarterly report in five bullet points",
    "Translate this paragraph into Japanese",
    "请帮我把这段代码重构成异步版本",
    "この請求書の合計金額を確認してください",
    "회의록을 요약해 주세요",
    "Find flights from Lisbon to Tokyo next Friday ✈️",
    "Generate a SQL query for the top 10 customers by revenue",
    "Review this pull request for security issues 🔒",
    "Analyse the sentiment of these posts 😀👍🎉",
    "Plan a 3-day trip to Kyoto 京都 with a budget of ¥80,000",
    "Draft a polite reply declining Thursday's meeting",
    'He said "ship it" \\o/ - check the changelog before release',
    "Écris un résumé de l'article en français",
    "Проверь, пожалуйста, этот договор",
    "Compute the SHA-256 of the attached file",
    "Rank these 5 suppliers by delivery time and price",
    "Explain why the build fails on ARM64 🤔",
)
FOLLOW_UPS: Final = (
    "Yes, use the production database",
    "Budget is 500 EUR, dates are flexible",
    "はい、それでお願いします",
    "Use TypeScript and add form validation",
    "继续，保留原来的接口",
    "Go ahead 👍",
)
QUESTIONS: Final = (
    "Which environment should I use?",
    "What is the budget?",
    "確認のため、対象の月を教えてください",
    "Do you want TypeScript or JavaScript?",
)
PROGRESS_TEXT: Final = (
    "Generating code...",
    "Fetching sources",
    "正在分析数据…",
    "Running tests 🧪",
    "Compiling report",
)
ARTIFACT_NAMES: Final = (
    "LoginForm.tsx",
    "summary.md",
    "報告書.pdf",
    "results.json",
    "itinerary.md",
    "review.txt",
)
SERVICE_CALLS: Final = (
    ("query_database", {"sql": "SELECT id, name FROM users LIMIT 10"}),
    ("get_weather", {"city": "東京", "units": "metric"}),
    ("convert_currency", {"amount": 250, "from": "EUR", "to": "BTC"}),
    ("send_invoice", {"amount_sats": 125000, "memo": "Consulting — March ☕"}),
    ("search_docs", {"query": "replay window", "limit": 10, "threshold": 0.75}),
)
FAILURES: Final = ("Upstream timeout", "Quota exceeded", "入力ファイルが見つかりません")


def random_uuid(rng: random.Random) -> str:
    """A random (version 4) UUID drawn from the sample's generator."""
    bits = (rng.getrandbits(128) & _UUID_CLEAR) | _UUID_SET
    h = f"{bits:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def random_token(rng: random.Random, prefix: str) -> str:
    """``<prefix>-`` and 16 random hex digits (task, context, artifact and trace ids)."""
    return f"{prefix}-{rng.getrandbits(64):016x}"


def iso(ts: int) -> str:
    """Unix seconds as an ISO 8601 UTC time (``2026-02-04T00:00:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class Content:
    """Payload pieces of honest conversations: contexts, user messages, artifacts, reports.

    A requester and an owner reuse a context half of the time (the last 8 they opened).
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.contexts: dict[tuple[int, int], list[str]] = {}

    def context(self, requester: Agent, owner: Agent) -> str:
        """A ``contextId`` for a new task of ``requester`` run by ``owner``."""
        known = self.contexts.setdefault((requester.index, owner.index), [])
        if known and self.rng.random() < 0.5:
            return self.rng.choice(known)
        context = random_token(self.rng, "ctx")
        known.append(context)
        if len(known) > 8:  # bounded memory on long samples: old contexts go quiet
            del known[0]
        return context

    def user_message(self, text: str | None = None) -> tuple[dict[str, Any], str]:
        """An A2A user message and the kind of request that carries it."""
        rng = self.rng
        parts: list[dict[str, Any]] = [{"text": text or rng.choice(PROMPTS)}]
        kind = ""
        roll = rng.random()
        if roll < 0.15:
            parts.append(
                {
                    "data": {
                        "users": [{"id": 1, "name": "Alice"}, {"id": 2, "name": "Bob"}],
                        "filters": {"active": True, "minScore": 0.5, "tags": ["vip", "新規"]},
                    }
                }
            )
        elif roll < 0.19:
            parts.append(
                {"url": "https://files.example/q3-report.pdf", "mediaType": "application/pdf"}
            )
        elif roll < 0.21:
            parts.append(
                {
                    "data": {
                        "ratio": 1.0,
                        "offset": -0.0,
                        "ledgerId": 9007199254740993,
                        "tiny": 1e-7,
                        "huge": 1e21,
                        "price": 19.99,
                    }
                }
            )
            kind = "numeric_edge"
        elif roll < 0.23:
            parts.append({"data": {"😀": "smile", "ｘ": 1, "é": 2, "a": 3, "中": [1, 2]}})
            kind = "unicode_keys"
        message = {"messageId": random_uuid(self.rng), "role": "user", "parts": parts}
        return message, kind

    def artifacts(self) -> list[dict[str, Any]]:
        """One artifact of a finished task: text, structured data or a small image."""
        rng = self.rng
        name = rng.choice(ARTIFACT_NAMES)
        roll = rng.random()
        part: dict[str, Any]
        if roll < 0.6:
            part = {"text": f"{rng.choice(PROMPTS)} — done ✅ ({rng.randint(1, 500)} lines)"}
        elif roll < 0.85:
            part = {
                "data": {
                    "rows": rng.randint(0, 10_000),
                    "score": rng.randint(0, 100) / 4,
                    "items": [{"sku": f"A-{rng.randint(100, 999)}", "qty": rng.randint(1, 9)}],
                }
            }
        else:
            part = {
                "raw": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
                "mediaType": "image/png",
            }
        return [{"artifactId": random_token(self.rng, "artifact"), "name": name, "parts": [part]}]

    def report(
        self,
        delay: float,
        owner: Agent,
        requester: Agent,
        method: str,
        task_id: str,
        context: str,
        state: str,
        source: str,
        *,
        kind: str = "",
        signed: bool | None = None,
    ) -> Step:
        """A response carrying ``payload.task`` in ``state`` (timestamp filled when sent)."""
        status: dict[str, Any] = {"state": state, "timestamp": ""}
        if state == "input_required":
            status["message"] = {"role": "agent", "parts": [{"text": self.rng.choice(QUESTIONS)}]}
        elif state == "failed":
            status["message"] = {"role": "agent", "parts": [{"text": self.rng.choice(FAILURES)}]}
        task: dict[str, Any] = {"id": task_id, "contextId": context, "status": status}
        if state == "completed":
            task["artifacts"] = self.artifacts()
        if signed is None:
            signed = self.rng.random() >= UNSIGNED_SHARE
        return Step(
            delay,
            owner,
            requester,
            "response",
            method,
            {"task": task},
            source,
            signed,
            kind,
            status,
        )
