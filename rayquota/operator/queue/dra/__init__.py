"""Quota for Dynamic Resource Allocation devices (issue #30): device classes mapped to quota
resources (Kueue's ``resources.deviceClassMappings``), and the devices a pod template's
``resourceClaims`` ask for, counted per pod as Kueue v0.19.2 counts them."""
