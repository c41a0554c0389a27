package argoapp

// Describe names who initiated an operation, for messages: the user name, Argo CD's automated
// sync, or both. The applier and readiness say it the same way.
func (i OperationInitiator) Describe() string {
	switch {
	case i.Username != "" && i.Automated:
		return i.Username + " (automated)"
	case i.Username != "":
		return i.Username
	case i.Automated:
		return "Argo CD's automated sync"
	}
	return "an unknown initiator"
}
