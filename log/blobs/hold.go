package blobs

import "sync"

// A purge in a running sidecar races the calls it serves: a call finds a
// blob present (or writes it), and its entry naming the blob is committed
// a moment later. Were the blob deleted in between, the entry would name
// a payload gone before it was written. So the writer of an entry holds
// each blob it names from the moment it looks for it until the entry is
// in the log (or abandoned), and a purge dooms the blobs it is about to
// delete: it leaves out those held (retention: a newer entry names them),
// and a Hold of a doomed blob waits until the purge is done with it, then
// finds it gone and writes it anew.

// holds is a Store's held and doomed blobs.
type holds struct {
	mu     sync.Mutex
	cond   *sync.Cond
	held   map[string]int
	doomed map[string]bool
}

func (h *holds) init() {
	if h.cond == nil {
		h.cond = sync.NewCond(&h.mu)
		h.held, h.doomed = map[string]int{}, map[string]bool{}
	}
}

// Hold holds the blob named sum until release is called (more than once
// is harmless), waiting first while a purge has it doomed.
func (s *Store) Hold(sum string) (release func()) {
	h := &s.holds
	h.mu.Lock()
	h.init()
	for h.doomed[sum] {
		h.cond.Wait()
	}
	h.held[sum]++
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			if h.held[sum]--; h.held[sum] <= 0 {
				delete(h.held, sum)
			}
			h.mu.Unlock()
		})
	}
}

// Doom marks for deletion each of names that no Hold holds and no other
// Doom has marked, and returns them: until Undoom, a Hold of one waits.
// It never waits itself, so a hold left open costs only a blob kept.
func (s *Store) Doom(names []string) []string {
	h := &s.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	var out []string
	for _, n := range names {
		if h.held[n] == 0 && !h.doomed[n] {
			h.doomed[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Undoom ends what Doom marked of names, waking the Holds that wait.
func (s *Store) Undoom(names []string) {
	h := &s.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range names {
		delete(h.doomed, n)
	}
	if h.cond != nil {
		h.cond.Broadcast()
	}
}
