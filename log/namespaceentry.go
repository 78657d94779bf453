package log

import (
	"errors"
	"fmt"
	"time"
)

// KindNamespace is the kind of the entry that reserves an OAuth issuer's
// actor namespace on the log.
const KindNamespace = "namespace"

// A NamespaceEntry records that a sidecar of the log was configured with
// an OAuth issuer whose actors are ids beginning ActorPrefix: from this
// entry on the namespace is that issuer's on every sidecar of the log, so
// none of them lets a static token or a stdio client act in it, though its
// own config never named the issuer and the issuer's actors have written
// nothing yet. It is written by the sidecar, as [GenesisActor], before the
// issuer's first token is taken, and once per prefix.
type NamespaceEntry struct {
	Time time.Time
	// Issuer is the issuer's URL as configured (its iss).
	Issuer string
	// ActorPrefix is what the issuer's actor ids begin with, compared
	// regardless of case.
	ActorPrefix string
}

// Marshal returns the entry's canonical bytes.
func (n *NamespaceEntry) Marshal() ([]byte, error) {
	if n.Issuer == "" || n.ActorPrefix == "" {
		return nil, errors.New("namespace entry: an issuer and an actor prefix are required")
	}
	return (&Entry{Kind: KindNamespace, Time: n.Time, Actor: GenesisActor, Fields: map[string]any{
		"issuer": n.Issuer, "actor_prefix": n.ActorPrefix,
	}}).Marshal()
}

// ParseNamespaceEntry reads e, a namespace entry. It refuses one not by
// [GenesisActor] (no client writes one) and one without an issuer or an
// actor prefix; members it does not know are ignored, so a later version
// may add some.
func ParseNamespaceEntry(e *Entry) (*NamespaceEntry, error) {
	if e.Kind != KindNamespace {
		return nil, fmt.Errorf("entry is a %q, not a namespace entry", e.Kind)
	}
	if e.Actor != GenesisActor {
		return nil, fmt.Errorf("namespace entry: by actor %q, not %q", e.Actor, GenesisActor)
	}
	n := &NamespaceEntry{Time: e.Time}
	n.Issuer, _ = e.Fields["issuer"].(string)
	n.ActorPrefix, _ = e.Fields["actor_prefix"].(string)
	if n.Issuer == "" || n.ActorPrefix == "" {
		return nil, errors.New("namespace entry: issuer and actor_prefix must be strings that are not empty")
	}
	return n, nil
}
