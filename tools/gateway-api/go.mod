// Pins the Gateway API release whose standard-channel CRDs (Gateway, HTTPRoute, ...) the local
// control plane installs: the module ships them as YAML under config/crd/standard.
module rayquota.local/tools/gateway-api

go 1.24.0

require sigs.k8s.io/gateway-api v1.4.1
