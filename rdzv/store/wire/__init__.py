"""The sans-IO codec of torch's TCPStore protocol: requests and replies as values and bytes.

Modules, lowest first; each imports only modules listed before it:

* ``_messages``  each request as a value (``Op``, ``Request`` and one class per request)
* ``_wire``      the byte layout: encoding requests and replies, the limits a server keeps
* ``_decoder``   ``RequestDecoder``: bytes in, decoded requests out (incremental)
* ``_convert``   keys, values and timeouts as users pass them, converted once (pure)

Imports: the standard library (no socket, no clock) and :mod:`rdzv.errors`; nothing else of
:mod:`rdzv.store`. Empty on purpose: importing the package costs nothing.
"""
