"""Constants taken verbatim from the Chatbot Management Service API v1 contract.

This is the only module that botctl's client side and the sandbox share: values here are
facts of the contract (section numbers in comments), never behaviour. Keeping behaviour out
of it means a misunderstanding of the contract cannot hide on both sides at once.
"""

from __future__ import annotations

from typing import Final

API_PREFIX: Final = "/api/v1"

# 2.2 Settings update, field `model`.
SETTINGS_MODELS: Final[tuple[str, ...]] = (
    "gpt-4o-mini",
    "gpt-oss-120b",
    "gpt-oss-20b",
    "gpt-5.2",
    "gpt-5.5",
    "gpt-5.6-terra",
    "gpt-5.6-luna",
    "gpt-5-mini",
    "gpt-5-nano",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-sonnet-4-6",
    "claude-opus-4-5",
    "claude-haiku-4-5",
    "claude-sonnet-4-5",
    "gemini-2.5-pro",
    "gemini-3-flash",
    "gemini-3.1-flash-lite",
    "gemini-3.1-pro",
    "gemini-3.5-flash",
    "gemini-3.5-flash-lite",
    "gemini-3.6-flash",
    "grok-3",
    "grok-3-mini",
    "grok-4",
    "DeepSeek-V3",
    "DeepSeek-R1",
    "DeepSeek-V4-Flash",
    "Llama-4-Scout-17B-16E-Instruct",
    "Llama-4-Maverick-17B-128E-Instruct-FP8",
    "kimi-k2",
    "mistral-medium-3.5",
    "mistral-small-2603",
    "glm-5.2",
    "auto",
)

# 2.2 gives no rule for a model identifier, but every one of both lists has this shape; a
# model released after the contract is expected to have it too. Used where a model outside
# the lists is accepted on explicit request (botctl --allow-unknown-models, the sandbox's
# --extra-model) and by the JSON Schema, which cannot know of either option.
MODEL_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]*$(?!\n)"
MODEL_ID_HINT: Final = "must be a model identifier: letters, digits, '.', '_' or '-'"

# 2.2 Chat operation, optional field `model`.
CHAT_MODELS: Final[tuple[str, ...]] = (
    "o4-mini",
    "o3",
    "gpt-4.1",
    "gpt-4.1-mini",
    "gpt-4.1-nano",
    "gpt-4.5",
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4-turbo",
    "gpt-4",
    "o3-mini",
    "claude-sonnet-4",
    "claude-opus-4",
    "claude-3-7-sonnet",
    "claude-3-5-sonnet",
    "claude-3-opus",
    "claude-3-haiku",
    "gemini-1.5-pro",
    "gemini-1.5-flash",
    "gemini-2.0-flash",
    "gemini-2.0-pro",
    "command-r",
    "command-r-plus",
    "DeepSeek-V3",
    "DeepSeek-R1",
    "Llama-4-Scout-17B-16E-Instruct",
    "Llama-4-Maverick-17B-128E-Instruct-FP8",
    "grok-3",
    "grok-3-mini",
)
# 4.2: these chat models work only on the Standard and Unlimited plans.
CHAT_MODELS_STANDARD_ONLY: Final[tuple[str, ...]] = ("gpt-4", "gpt-4-turbo")

# 2.1 / 2.3 enums.
VISIBILITIES: Final[tuple[str, ...]] = ("public", "private")
THEMES: Final[tuple[str, ...]] = ("light", "dark")
ALIGNMENTS: Final[tuple[str, ...]] = ("left", "right")
TEMP_MIN: Final = 0.0
TEMP_MAX: Final = 1.0

# Every pattern below ends in `$(?!\n)` where the contract writes `$`. In ECMA-262 (the regex
# dialect of JSON Schema and OpenAPI, used by editors) `$` is the end of the text and the
# lookahead changes nothing; in Python's `re` (the `jsonschema` package, pydantic's python-re
# engine) `$` also matches before a final newline, which the lookahead refuses. So "plan\n"
# is refused by every engine that reads these patterns, not only by some.
# Pydantic reads them with Python's re: its default engine has no lookahead.
PATTERN_ENGINE: Final = "python-re"

# 2.1 and 4.3-4.9: a chatbot id is a string that goes into URL paths
# (/chatbots/{chatbotId}/custom-attributes), and the contract gives it no format. botctl's
# rule: an id that is one path segment as written, so no request can reach another endpoint:
# letters, digits and "._~-" (the characters a URL never escapes), but not "." or ".." (a
# URL resolves them to this path or its parent), at most CHATBOT_ID_MAX_LENGTH characters.
CHATBOT_ID_MAX_LENGTH: Final = 128
CHATBOT_ID_PATTERN: Final = r"^(?!\.\.?$)[A-Za-z0-9._~-]+$(?!\n)"
CHATBOT_ID_HINT: Final = (
    "must be one URL path segment: letters, digits, '.', '_', '~' or '-', and not '.' or "
    "'..' (a chatbot id goes into request paths as written)"
)

# 2.8 Custom attribute.
ATTRIBUTE_NAME_PATTERN: Final = r"^[a-zA-Z][a-zA-Z0-9_-]*$(?!\n)"
ATTRIBUTE_NAME_HINT: Final = (
    f"must start with a letter, then letters, digits, '_' or '-' ({ATTRIBUTE_NAME_PATTERN})"
)
# A second guide of the service is stricter (API-NOTES); botctl warns when a name breaks it.
ATTRIBUTE_NAME_STRICT_PATTERN: Final = r"^[a-z][a-z0-9_]*$(?!\n)"
ATTRIBUTE_TYPES: Final[tuple[str, ...]] = ("text", "number", "boolean", "date")

# 8 Limits.
CONTACTS_PAGE_SIZE_MIN: Final = 10
CONTACTS_PAGE_SIZE_MAX: Final = 1000
CONVERSATIONS_PAGE_SIZE_MAX: Final = 100  # API-NOTES: `size` max 100

# 4.6 Conversation sources the contract names; it says four more exist, for third-party
# messaging and chat channels, without naming them.
CONVERSATION_SOURCES: Final[tuple[str, ...]] = (
    "API",
    "Playground",
    "Action preview",
    "Widget or Iframe",
)

# 1 Collections (tags) of the interface.
COLLECTIONS: Final[tuple[str, ...]] = (
    "Chatbots",
    "Chat",
    "Conversations",
    "Leads",
    "Contacts",
    "Assets",
)

# 7 Error messages observed.
MSG_INVALID_DATA: Final = "Invalid request data"
MSG_INVALID_BODY: Final = "Invalid request body"
MSG_NO_KEY: Final = "No API key provided."
MSG_UNAUTHORIZED: Final = "Unauthorized access"
MSG_FORBIDDEN: Final = "Access denied or quota exceeded"
MSG_NOT_FOUND: Final = "Resource not found"
MSG_ATTRIBUTE_NOT_FOUND: Final = "Custom attribute not found"
MSG_CHATBOT_NOT_FOUND: Final = "Chatbot not found"
MSG_RATE_LIMITED: Final = "Rate limit exceeded"
MSG_INTERNAL: Final = "Internal server error"
MSG_SETTINGS_SAVED: Final = "Your changes are saved."

# Plans of the service's accounts (paid plans may chat).
PLANS: Final[tuple[str, ...]] = ("free", "hobby", "standard", "unlimited")

# 2.3 says "Hex colour code": every hex notation of CSS Color 4, #RGB, #RGBA, #RRGGBB and
# #RRGGBBAA (the service may hold a colour with alpha such as #ffffff80, so botctl must be
# able to write it back).
HEX_COLOUR_PATTERN: Final = r"^#(?:[0-9a-fA-F]{3,4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$(?!\n)"
HEX_COLOUR_HINT: Final = "must be a hex colour such as #0a84ff or #fff"

# What a value that breaks a pattern is told (after its field's name), by pattern: each is
# declared beside its pattern above. A pattern a model uses without a hint here (or beside it
# in ``config.document``) fails ``tests/config/test_messages.py``, never a silent "has the
# wrong format".
PATTERN_HINTS: Final[dict[str, str]] = {
    MODEL_ID_PATTERN: MODEL_ID_HINT,
    CHATBOT_ID_PATTERN: CHATBOT_ID_HINT,
    ATTRIBUTE_NAME_PATTERN: ATTRIBUTE_NAME_HINT,
    HEX_COLOUR_PATTERN: HEX_COLOUR_HINT,
}
