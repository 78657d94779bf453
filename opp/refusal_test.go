package opp_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// TestRefusalIsAProblem: a refusal is the one problem type every check
// reports, found through wrapping, with its rule; other errors, and other
// checks' problems, are not refusals.
func TestRefusalIsAProblem(t *testing.T) {
	err := fmt.Errorf("accept: %w", opp.Refuse(opp.RuleOwned, "task %s is owned by %s", "t_1", "bob"))
	var pe *log.ProblemsError
	if !errors.As(err, &pe) || len(pe.Problems) != 1 {
		t.Fatalf("a refusal is not a *log.ProblemsError of one problem: %#v", err)
	}
	p, ok := opp.Refusal(err)
	if !ok || p.Rule != opp.RuleOwned || p.Msg != "task t_1 is owned by bob" {
		t.Fatalf("Refusal(%v) = %+v, %v", err, p, ok)
	}
	if got, want := p.String(), "request: task t_1 is owned by bob"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for _, other := range []error{
		nil,
		errors.New("disk on fire"),
		&log.ProblemsError{What: "log", Problems: []log.Problem{{Part: "entry 3", Msg: "bad"}}},
	} {
		if p, ok := opp.Refusal(other); ok {
			t.Errorf("Refusal(%v) = %+v, true", other, p)
		}
	}
	v := opp.Violation{Index: 7, Kind: "task.claim", Rule: opp.RuleEvidence, Msg: "entry 9 is not below 7"}
	if got := v.Problem(); got.Rule != opp.RuleEvidence || got.String() != "entry 7 (task.claim): breaks rule evidence: entry 9 is not below 7" {
		t.Errorf("violation problem %+v: %s", got, got)
	}
}

// TestHandoffToUnknownActor: with KnownActor set, a handoff to an actor the
// deployment does not know is refused and writes nothing; a known one
// goes through.
func TestHandoffToUnknownActor(t *testing.T) {
	l := newLog(t)
	e, err := opp.Open(ctx, l, l.Size(), &opp.Options{KnownActor: func(id string) error {
		if id == "bob" || id == "carol" {
			return nil
		}
		return errors.New("no actor " + strconv.Quote(id) + " here")
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := mustOK(t)(e.Create(ctx, "bob", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	before := l.Size()
	_, err = e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: id, To: "mallory"})
	if re, ok := opp.Refusal(err); !ok || re.Rule != opp.RuleHandoffTarget || !strings.Contains(err.Error(), `no actor "mallory" here`) {
		t.Fatalf("handoff to an unknown actor: %v", err)
	}
	if l.Size() != before {
		t.Fatal("a refused handoff wrote an entry")
	}
	mustOK(t)(e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: id, To: "carol"}))

	// An offer to an unknown actor would leave the task reserved for
	// nobody who can accept it, as a handoff would.
	for _, to := range []string{"mallory", "bob ", "bo\x00b", "   "} {
		before := l.Size()
		_, err := e.Create(ctx, "bob", opp.CreateArgs{Title: "t", OfferTo: to})
		if re, ok := opp.Refusal(err); !ok || re.Rule != opp.RuleInvalidArgument || !strings.Contains(err.Error(), "offer_to: no actor "+log.Printable(strconv.Quote(to))+" here") {
			t.Fatalf("offer to %q: %v", to, err)
		}
		if l.Size() != before {
			t.Fatalf("a refused offer to %q wrote an entry", to)
		}
	}
	offered := mustOK(t)(e.Create(ctx, "bob", opp.CreateArgs{Title: "t", OfferTo: "carol"})).Task.ID
	mustOK(t)(e.Accept(ctx, "carol", offered))
	checkRebuild(t, l, e)
}

// TestInvisibleText: a title, summary or source of nothing a reader can
// see (spaces of any kind, zero-width and control characters) is refused
// as blank and writes nothing.
func TestInvisibleText(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "bob", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	for _, blank := range []string{"\u200b", "\u00a0\u3000\u200b", "\x00\x1b", "\u202e\ufeff"} {
		before := l.Size()
		_, err := e.Create(ctx, "bob", opp.CreateArgs{Title: blank})
		if re, ok := opp.Refusal(err); !ok || re.Rule != opp.RuleInvalidArgument || !strings.Contains(err.Error(), "title has no visible character") {
			t.Errorf("title %q: %v", blank, err)
		}
		_, err = e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reviewed", Summary: blank})
		if re, ok := opp.Refusal(err); !ok || re.Rule != opp.RuleInvalidArgument || !strings.Contains(err.Error(), "summary has no visible character") {
			t.Errorf("summary %q: %v", blank, err)
		}
		_, err = e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: "s", Source: blank})
		if re, ok := opp.Refusal(err); !ok || re.Rule != opp.RuleSource {
			t.Errorf("source %q: %v", blank, err)
		}
		if l.Size() != before {
			t.Fatalf("a refused blank %q wrote an entry", blank)
		}
	}
	// Anything that shows is a title: one letter, a mark, a symbol.
	for _, title := range []string{"x", "\u200b x", "✓", "日本"} {
		mustOK(t)(e.Create(ctx, "bob", opp.CreateArgs{Title: title}))
	}
	checkRebuild(t, l, e)
}

// TestInvisibleGraphicText: a title of characters that are graphic yet
// show as nothing (Hangul fillers, variation selectors, the combining
// grapheme joiner, the blank braille pattern) is as blank as one of
// zero-width spaces: opp counts a character visible as actor ids do
// (log.Invisible).
func TestInvisibleGraphicText(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	for _, blank := range []string{"\u3164", "\u115f\u1160", "\uffa0 \ufe0f", "\u034f", "\u2800\u2800", "\U000e0100"} {
		for _, r := range blank {
			if !unicode.IsSpace(r) && log.CheckActor("x"+string(r), opp.MaxActor) == nil {
				t.Fatalf("U+%04X is invisible in a title but not in an actor id", r)
			}
		}
		before := l.Size()
		_, err := e.Create(ctx, "bob", opp.CreateArgs{Title: blank})
		if re, ok := opp.Refusal(err); !ok || re.Rule != opp.RuleInvalidArgument || !strings.Contains(err.Error(), "title has no visible character") {
			t.Errorf("title %q: %v", blank, err)
		}
		if l.Size() != before {
			t.Fatalf("a refused blank %q wrote an entry", blank)
		}
	}
	mustOK(t)(e.Create(ctx, "bob", opp.CreateArgs{Title: "\u3164x"}))
	checkRebuild(t, l, e)
}

// TestInvisibleShownByNumber: text with an invisible character among
// visible ones is written as given, and shown with that character by
// number, so "pay\u200bme" does not read as "payme" in tasks show.
func TestInvisibleShownByNumber(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "bob", opp.CreateArgs{Title: "pay\u200bme \u3164x\u2066"})).Task.ID
	task, err := e.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := opp.FormatTask(&b, task); err != nil {
		t.Fatal(err)
	}
	if want := `pay\u200bme \u3164x\u2066`; !strings.Contains(b.String(), want) {
		t.Errorf("show lacks %q:\n%s", want, b.String())
	}
}

// TestLongTaskIDCutWhole: a refusal quoting a long task id cuts it to 64
// bytes at a character's start, never inside one; the id here puts byte 64
// inside a two-byte "é". Before, the cut left half a character, which the
// refusal's quoting showed as "\xc3".
func TestLongTaskIDCutWhole(t *testing.T) {
	e := newEngine(t, newLog(t))
	_, err := e.Accept(ctx, "bob", "t_x"+strings.Repeat("é", 40))
	p, ok := opp.Refusal(err)
	if !ok || p.Rule != opp.RuleUnknownTask {
		t.Fatalf("accept of a long id: %v", err)
	}
	if !utf8.ValidString(p.Msg) || strings.Contains(p.Msg, `\x`) || !strings.Contains(p.Msg, `"t_x`+strings.Repeat("é", 30)+`…"`) {
		t.Errorf("refusal %q: want the id cut whole after 64 bytes", p.Msg)
	}
}
