package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/proxy/authn"
)

// handoffTarget refuses a handoff or an offer (create_task's offer_to) to
// an actor no token of the config acts as, once the config lists actors
// (and does not set handoff_any_actor); mayReceiveHandoff says yes to all
// otherwise.
func (s *sidecar) handoffTarget(id string) error {
	if err := authn.CheckActor(id, opp.MaxActor); err != nil {
		return err // no token could act as it (an issuer's id with U+200B, say)
	}
	if a, ok := s.tokens.lookAlike(id); ok {
		return fmt.Errorf("%q reads as the configured actor %q but is not it, so nobody could accept the task; name %q", id, a, a)
	}
	if a := s.cfg.Actor; a != "" && a != id && authn.Skeleton(a) == authn.Skeleton(id) {
		return fmt.Errorf("%q reads as the configured actor %q but is not it, so nobody could accept the task; name %q", id, a, a)
	}
	auth := s.authn.Config() // as reloaded
	if auth.Reserves(id) && !auth.Owns(id) {
		return fmt.Errorf("%q is in an identity provider's actor namespace (its actor_prefix, in any case), but no token of it maps to that id, so nobody could accept the task; name the actor as its tokens map to it", id)
	}
	if id == s.cfg.Actor || s.tokens.mayReceiveHandoff(id) || auth.Owns(id) {
		return nil // a configured actor, or one of a trusted issuer's
	}
	if auth.Enabled() {
		var prefixes []string
		for _, is := range auth.Issuers {
			prefixes = append(prefixes, strconv.Quote(is.ActorPrefix))
		}
		return fmt.Errorf("no actor %q is configured here, so nobody could accept the task; name an actor listed under actors: in the config, or an identity provider's actor, whose id begins with %s, or set handoff_any_actor: true there", id, strings.Join(prefixes, " or "))
	}
	return fmt.Errorf("no actor %q is configured here, so nobody could accept the task; name an actor listed under actors: in the config, or set handoff_any_actor: true there", id)
}
