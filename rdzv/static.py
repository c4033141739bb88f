"""Alias of :mod:`rdzv.rendezvous.static`: the ``static`` backend."""

from rdzv.rendezvous import static as _static
from rdzv.rendezvous.static import *  # noqa: F403

__all__ = list(_static.__all__)
