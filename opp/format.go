package opp

import (
	"bufio"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/provlog/provlog/log"
)

// listBlock is how many rows of a task list are aligned together: the
// table is written a block at a time, so that listing a million tasks
// holds a block, not the list.
const listBlock = 1000

// FormatList writes tasks as a table for people (provlog tasks list): id,
// state, owner, reservation, creator, age at now, and title. Columns are
// aligned within each block of listBlock rows. An error from tasks stops
// the list and is returned.
func FormatList(w io.Writer, tasks iter.Seq2[*Task, error], now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tOWNER\tRESERVED FOR\tCREATOR\tCREATED\tAGE\tTITLE")
	rows := 0
	for t, err := range tasks {
		if err != nil {
			tw.Flush()
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.State, dash(t.Owner), dash(t.Reservation),
			clean(t.Creator, 40), t.Created.UTC().Format(time.RFC3339), Age(now.Sub(t.Created)), clean(t.Title, 60))
		if rows++; rows%listBlock == 0 {
			if err := tw.Flush(); err != nil {
				return err
			}
		}
	}
	if rows == 0 {
		fmt.Fprintln(tw, "(no tasks)")
	}
	return tw.Flush()
}

// FormatTask writes a task and its full history for people (provlog tasks
// show ID). Every event names its log index and leaf hash, so each can be
// proven with provlog prove --index N.
func FormatTask(w io.Writer, t *Task) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p("Task %s\n", t.ID)
	p("  Title:         %s\n", clean(t.Title, 0))
	if t.Description != "" {
		p("  Description:   %s\n", clean(t.Description, 0))
	}
	p("  Creator:       %s\n", clean(t.Creator, 0))
	p("  Created:       %s (entry %d)\n", stamp(t.Created), t.CreatedIndex)
	p("  State:         %s (since %s)\n", t.State, stamp(t.Since))
	p("  Owner:         %s\n", dash(t.Owner))
	p("  Reserved for:  %s\n", dash(t.Reservation))
	p("\nHistory (%d entries; prove any with: provlog prove --index N)\n", len(t.History))
	for _, ev := range t.History {
		p("\n  #%d  %s  %s  by %s\n", ev.Index, stamp(ev.Time), ev.Kind, clean(ev.Actor, 0))
		p("      leaf hash   %s\n", ev.LeafHash)
		if a := ev.Auth; a != nil {
			formatAuth(p, a)
		}
		switch ev.Kind {
		case KindCreate:
			p("      title       %s\n", clean(ev.Title, 0))
			if ev.Description != "" {
				p("      description %s\n", clean(ev.Description, 0))
			}
			if ev.OfferTo != "" {
				p("      offered to  %s (reserved; not owner until accepted)\n", clean(ev.OfferTo, 0))
			}
		case KindClaim:
			p("      provenance  %s\n", ev.Provenance)
			p("      summary     %s\n", clean(ev.Summary, 0))
			if ev.Source != "" {
				p("      source      %s\n", clean(ev.Source, 0))
			}
			if len(ev.Evidence) > 0 {
				s := make([]string, len(ev.Evidence))
				for i, x := range ev.Evidence {
					s[i] = "#" + strconv.FormatUint(x, 10)
				}
				p("      evidence    %s\n", strings.Join(s, " "))
			}
		case KindHandoff:
			p("      to          %s (reserved; must accept)\n", clean(ev.To, 0))
			if s := ev.Snapshot; s != nil {
				p("      snapshot    state %s, owner %s, reserved for %s, history head #%d (%s), %d claim(s)\n",
					s.State, dash(s.Owner), dash(s.Reservation), s.HistoryHead.Index, s.HistoryHead.LeafHash, len(s.Claims))
				for _, c := range s.Claims {
					p("                  claim #%d by %s, %s (%s)\n", c.Index, clean(c.Actor, 0), c.Provenance, c.LeafHash)
				}
			}
		}
		if ev.Note != "" {
			p("      note        %s\n", clean(ev.Note, 0))
		}
	}
	return bw.Flush()
}

// formatAuth writes an event's auth member: who the identity provider
// says acted, through which client, and the act chain, outermost (the
// party acting now) first.
func formatAuth(p func(string, ...any), a *log.Auth) {
	p("      issuer      %s\n", clean(a.Issuer, 0))
	p("      subject     %s\n", clean(a.Subject, 0))
	if a.ClientID != "" {
		p("      client      %s\n", clean(a.ClientID, 0))
	}
	for x, k := a.Act, 0; x != nil; x, k = x.Act, k+1 {
		who := clean(x.Subject, 0)
		if x.ClientID != "" {
			who += " (client " + clean(x.ClientID, 0) + ")"
		}
		if x.Issuer != "" && x.Issuer != a.Issuer {
			who += " of " + clean(x.Issuer, 0)
		}
		if k == 0 {
			p("      act         %s, acting for %s\n", who, clean(a.Subject, 0))
		} else {
			p("        through   %s\n", who)
		}
	}
	if a.JTI != "" {
		p("      token jti   %s\n", clean(a.JTI, 0))
	}
	p("      token       SHA-256 %s (%s; the token itself is never logged)\n", a.TokenSHA256, a.Via)
}

// Age formats a duration as people read an age: "45s", "12m", "3h20m",
// "2d4h".
func Age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s, 40)
}

// clean makes caller-supplied text safe to print on one line, through
// log.Printable as every command's text from a log is: characters that
// do not show as themselves are escaped, and text over max characters
// (if max > 0) is cut with an ellipsis first, so the cut counts the
// characters the text holds.
func clean(s string, max int) string {
	n := 0
	for i := range s {
		if max > 0 && n == max {
			return log.Printable(s[:i]) + "…"
		}
		n++
	}
	return log.Printable(s)
}
