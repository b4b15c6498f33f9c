"""``IndexMapText``: an index map's lambda as text (``layout_transform``'s ``index_map`` attribute), a ``str`` the
printer writes as TVM does, ``T.index_map(lambda n, c: (c, n))``, rather than quoted."""


class IndexMapText(str):
    """A lambda's source (``"lambda n, c: (c, n)"``), equal to the plain string; only its printed form differs."""

    __slots__ = ()
