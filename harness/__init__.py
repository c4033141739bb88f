"""harness: a fault-injection harness for rendezvous.

Module map (grows with each issue):

* ``errors``          HarnessError tree
* ``toxics``          pure toxic logic with Toxiproxy's names and attributes
* ``proxy``           asyncio TCP relay applying toxics per connection and direction
* ``toxiproxy_api``   the Toxiproxy-compatible HTTP control plane over ``proxy``
* ``toxiproxy_client`` one typed client over toxiproxy-python, whichever server is behind it
* ``cli``             ``harness proxy`` (and later ``run | list | fuzz | replay``)
"""
