package opp

// What a failed call proves. An observed claim says the claimant saw the
// work done in its own calls. A call whose outcome is a failure (a
// call.result with is_error, or with an error and no result) shows that
// what it saw was the work failing, so it is no observation of
// completion: an observed claim must cite at least one call that
// succeeded. A failed call cited beside one (the failing run before the
// fix) is accepted, and a reviewed claim may cite failed calls alone.
// Like checkNew, this is checked when a claim is written, not when the
// log is rebuilt: a log an older provlog wrote, with an observed claim on
// failed calls alone, rebuilds and audits as it did.
//
// A call.result names its call, not the other way round, so the engine
// learns which calls failed as it follows the log's calls (callSet): 8
// bytes a failed call, saved with the task index; a claim then reads
// nothing more to tell.

// checkSucceeded checks that r, an observed claim that passed check, cites
// a call that succeeded.
func checkSucceeded(r *record) error {
	if r.kind != KindClaim || r.provenance != Observed || len(r.failed) == 0 {
		return nil
	}
	for _, f := range r.failed {
		if !f {
			return nil
		}
	}
	return Refuse(RuleEvidence, "every call this observed claim cites failed (its call.result has is_error, or an error and no result): a failed call shows you saw the work fail, not done. Cite a call of yours that succeeded (beside the failed ones, if they matter), or claim provenance reviewed or reported")
}
