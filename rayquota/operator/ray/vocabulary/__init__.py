"""The names every Ray controller and the queue share: KubeRay's labels and annotations, and metav1
conditions."""
