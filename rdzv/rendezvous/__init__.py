"""The static rendezvous: torch's rendezvous API over the TCP store of :mod:`rdzv.store`.

Modules, lowest first; each imports only modules listed before it, except one lazy
import: ``api`` reaches ``registry`` (as torch's API module does). Importing ``static`` (or
``registry``) imports everything a join needs but the store server, which a hosting
handler imports when it is built (no process imports asyncio: the server runs its own epoll loop):

* ``api``             torch's ``RendezvousHandler`` ABC, parameters and results
* ``_config_values`` one option's value parsed and checked: timeout, rank, bool, fd (pure)
* ``_static_config``  the ``static`` backend's options, validated once (pure)
* ``_liveness`` ``_round_state``  is a claimant alive; store keys, identities, verdicts
* ``_round_rules``    the round's decisions, each citing its invariant of ``_join`` (no I/O)
* ``_round_failures`` the errors and messages users see (pure)
* ``_connection``     a node's connections to the store: dial, a fresh one, close
* ``_round_io``       one round's store calls: bounded by the deadline, failures raised
* ``_verdict``        a node's part in the round's verdict: propose, read, acknowledge
* ``_count``          a member counts itself in (and, on an rdzv store, waits for the verdict)
* ``_departures``     the hosting node's watch of members leaving: read, left, or gone
* ``_exit``           the exit barriers (after a round, at shutdown)
* ``_deadline``       past a member's deadline: one elected diagnoser names the missing ranks
* ``_takeover``       a claim of a dead predecessor taken over (or the round rejected)
* ``_express``        a member's happy path as one script, made straight by the store client
* ``_join``           the join protocol of one round
* ``_lost_member``    the hosting node's watch for members that vanish mid-round
* ``_node``           one handler's node across rounds: connection, watches, rounds
* ``static``          ``StaticTCPRendezvous``, the ``static`` backend (torch's surface)
* ``registry``        backend name -> handler factory (``static`` + entry-point plugins)

Imports: the standard library, :mod:`rdzv.errors`, :mod:`rdzv.events`,
:mod:`rdzv.endpoint` and :mod:`rdzv.store` (which never imports this package).
"""
