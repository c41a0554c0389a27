# The workload of the example charts in the compose demo's kind cluster (make compose-demo): the
# examples' images (registry.invalid) never pull. It sleeps, so every Deployment and DaemonSet
# turns Available; run with the readiness gate's --checks argument it exits 0 at once, so the
# gate's Job completes.
FROM busybox:1.37
USER 65532:65532
ENTRYPOINT ["/bin/sh", "-c", "case \"$1\" in --checks) exit 0 ;; esac; exec sleep 2147483647", "demo-workload"]
