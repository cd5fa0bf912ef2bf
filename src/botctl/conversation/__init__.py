"""Conversation tests (``kind: ConversationTest``): each test's conversation sent to each of its
chatbots through the chat operation, the answers checked against the expectations, the
outcome as a report the renderers and the exit code read.

``expect``: one answer against one ``Expect`` (pure). ``run``: the conversations, in parallel
within the run's parallelism (the clients pace the requests), through a ``Chat`` function
the pipeline gives. ``report``: the results.
"""
