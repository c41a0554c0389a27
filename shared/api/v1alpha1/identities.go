package v1alpha1

// The operator's five binaries. A binary's name is its logger component, metrics namespace,
// NATS connection name and NATS user, its durable consumer where it has one, and the suffix of
// its Lease (LeaseName) and ServiceAccount (ServiceAccountName). The chart, docker-compose and
// the local stack use the same names; e2e/deploy checks the chart's against these.
const (
	BinaryPlanner       = "planner"
	BinaryApplier       = "applier"
	BinaryReadiness     = "readiness"
	BinaryCredRefresher = "credrefresher"
	BinaryAdmission     = "admission"
)

// ReleaseName is the chart's release name the operator's defaults assume: the chart names each
// binary's ServiceAccount <release>-<binary>.
const ReleaseName = "aicr-operator"

// Binaries returns the five binaries, in the chart's order.
func Binaries() []string {
	return []string{BinaryPlanner, BinaryApplier, BinaryReadiness, BinaryCredRefresher, BinaryAdmission}
}

// LeaseName is the leader-election Lease of a binary, in the operator namespace.
func LeaseName(binary string) string { return "aicr-" + binary }

// ServiceAccountName is the ServiceAccount a binary runs as, under the release name ReleaseName.
func ServiceAccountName(binary string) string { return ReleaseName + "-" + binary }

// ServiceAccountUser is the Kubernetes user name of a binary's ServiceAccount in namespace.
func ServiceAccountUser(namespace, binary string) string {
	return "system:serviceaccount:" + namespace + ":" + ServiceAccountName(binary)
}

// OperatorIdentities are the user names of the five binaries' ServiceAccounts in namespace:
// what the chart passes as --operator-identities to the planner and admission.
func OperatorIdentities(namespace string) []string {
	ids := make([]string, 0, 5)
	for _, b := range Binaries() {
		ids = append(ids, ServiceAccountUser(namespace, b))
	}
	return ids
}
