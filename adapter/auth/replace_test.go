package auth_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
)

// TestReplace: Replace swaps the whole set, under requests authenticating
// concurrently (run with -race): each sees the old set or the new one,
// never a mix; a later Add to either set does not reach the other.
func TestReplace(t *testing.T) {
	t.Parallel()
	live, err := auth.Parse("ann:operator:ann-secret-1, bob:reader:bob-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	next, err := auth.Parse("bob:operator:bob-secret-1, cy:agent:cy-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ann, annOK := live.Authenticate("ann-secret-1")
				bob, _ := live.Authenticate("bob-secret-1")
				// ann and bob as reader are the old set, neither ann nor
				// a reader bob the new; a mix is a bug (bob is read after
				// ann, so a swap in between shows as old ann, new bob).
				if !annOK && bob.Role == auth.RoleReader {
					t.Errorf("new set for ann, old for bob read after her: %+v %+v", ann, bob)
					return
				}
			}
		})
	}
	live.Replace(next)
	close(stop)
	wg.Wait()

	if _, ok := live.Authenticate("ann-secret-1"); ok {
		t.Error("ann, removed, still authenticates")
	}
	if p, ok := live.Authenticate("bob-secret-1"); !ok || p.Role != auth.RoleOperator {
		t.Errorf("bob after the swap: %+v %v, want operator", p, ok)
	}
	if p, ok := live.Authenticate("cy-secret-1"); !ok || p.Name != "cy" {
		t.Errorf("cy, new, after the swap: %+v %v", p, ok)
	}
	for i := range 3 {
		live.Add(fmt.Sprintf("l%d", i), auth.RoleReader, fmt.Sprintf("live-secret-%d", i))
		next.Add(fmt.Sprintf("n%d", i), auth.RoleReader, fmt.Sprintf("next-secret-%d", i))
	}
	if _, ok := next.Authenticate("live-secret-0"); ok {
		t.Error("an Add to the replaced set reached the set it was replaced with")
	}
	if _, ok := live.Authenticate("next-secret-0"); ok {
		t.Error("an Add to the source set reached the set that took it")
	}
	if live.Len() != 5 || next.Len() != 5 {
		t.Errorf("lengths %d %d, want 5 5", live.Len(), next.Len())
	}
}
