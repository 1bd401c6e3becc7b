package metrics

import (
	"slices"

	"github.com/failoverd/failoverd/sitepair"
	"github.com/failoverd/failoverd/status"
)

// other replaces a word outside its fixed set, so a caller's mistake (or a
// word added on the daemon's side before here) costs one series, not many.
const other = "other"

// The fixed words of each enum label ("other" is always allowed besides).
var (
	kinds = []string{"failover", "switchover"}
	// groupKinds are the kinds of a Group Replication primary change
	// failoverd followed: elected by the group itself, or asked by an
	// operator; lastFailoverKinds every kind a last failover can have.
	groupKinds        = []string{"failover-observed", "switchover"}
	lastFailoverKinds = []string{"failover", "switchover", "failover-observed"}
	// memberStates are Group Replication MEMBER_STATE values (grview).
	memberStates    = []string{"ONLINE", "RECOVERING", "UNREACHABLE", "ERROR", "OFFLINE"}
	failoverResults = []string{"promoted", "failed", "superseded"}
	phases          = []string{"revoke", "proof", "drain", "detach", "publish", "writable", "repoint"}
	fencers         = []string{"daemon", "sidecar"}
	// proofs are sitepair's FenceProof constants (it has no list of them;
	// TestEnumsComeFromTheirSources reads them from its source).
	proofs = []string{
		string(sitepair.ProofFenceConfirmed), string(sitepair.ProofPrimaryDown),
		string(sitepair.ProofSidecarFenced), string(sitepair.ProofLeaseExpired),
		string(sitepair.ProofSemiSync), string(sitepair.ProofOperatorConfirmed), string(sitepair.ProofNoFencing),
	}
	routingResults = []string{"ok", "error"}
	hookResults    = []string{"ok", "failed"}
	reloadResults  = []string{"applied", "refused"}
	states         = []string{status.StateUnknown, status.StateWritable, status.StateReadOnly, status.StateUnreachable}
	cacheRoles     = []string{"master", "replica"}
	// holdKinds and faults are sitepair's HoldKinds() and Faults().
	holdKinds = holdKindWords()
	faults    = faultWords()
	// classes, reasons and actions come from sitepair's reason table.
	classes = classWords()
	reasons = reasonWords()
	actions = actionWords()
)

func classWords() []string {
	var out []string
	for _, c := range sitepair.Classes() {
		out = append(out, string(c))
	}
	return out
}

func reasonWords() []string {
	var out []string
	for _, r := range sitepair.Reasons() {
		out = append(out, string(r))
	}
	return out
}

func actionWords() []string {
	var out []string
	for _, ri := range sitepair.ReasonTable() {
		if !slices.Contains(out, string(ri.Action)) {
			out = append(out, string(ri.Action))
		}
	}
	slices.Sort(out)
	return out
}

// oneOf returns v when it is one of words, else "other".
func oneOf(v string, words []string) string {
	if slices.Contains(words, v) {
		return v
	}
	return other
}

// storeTypes are the state store backends (configs.Store*).
var storeTypes = []string{"file", "kubernetes", "etcd"}

// recoveries are the recovery states of a site.
var recoveries = []string{status.RecoveryInProgress, status.RecoveryBlocked, status.RecoveryRecloning, status.RecoveryRecloneFailed}

func holdKindWords() []string {
	var out []string
	for _, k := range sitepair.HoldKinds() {
		out = append(out, string(k))
	}
	return out
}

func faultWords() []string {
	var out []string
	for _, f := range sitepair.Faults() {
		out = append(out, string(f))
	}
	return out
}
