"""``botctl agent``: the GitOps loop. A long-running reconciler that pulls the configuration
from a source (a directory, or a branch of a git repository), plans it against the service and
the state, applies new revisions and heals drift when told to, and says how it goes: a
listener (health, readiness, Prometheus metrics, status JSON, a status page, a webhook that
triggers a cycle), notifications, and logs.

- ``source``: the configuration's revisions (fetched shallow into the agent's own cache);
- ``loop``: the cycles, built on ``pipeline.flows`` (drift, apply under the lease);
- ``status``: what the agent knows (per chatbot, per cycle) and its metrics;
- ``listener``, ``page``: what it serves; ``hooks``, ``hosts``, ``guard``: the webhook's rules,
  the ``Host`` allow-list, the connection guard; ``sdnotify``: systemd's readiness and
  watchdog; ``notify``: where it reports; ``log``: its log
  lines.
"""
