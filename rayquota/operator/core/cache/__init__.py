"""The informer cache: each watched resource listed and watched (``informer``) into an in-memory
store with named indexes (``store``), equal subtrees of its objects kept once (``compact``), over
the namespaces the operator watches (``scope``)."""
