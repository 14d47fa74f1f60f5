package idtable

import "testing"

// An object is found under the id Add gave it until it is removed; removed,
// unissued and wrapped ids miss; the table grows past its first slots.
func TestTable_GrowsAndForgetsRemovedIDs(t *testing.T) {
	var r Table[item]
	var hs []*item
	for i := 0; i < 40; i++ {
		h := &item{i}
		if id := r.Add(h); id != uint64(i+1) {
			t.Fatalf("add #%d = id %d, want %d", i, id, i+1)
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		if id := uint64(i + 1); i%3 == 0 && r.Remove(id) != h {
			t.Errorf("remove(%d) did not return its object", id)
		}
	}
	for i, h := range hs {
		want := h
		if i%3 == 0 {
			want = nil
		}
		if got := r.Get(uint64(i + 1)); got != want {
			t.Errorf("get(%d) = %p, want %p", i+1, got, want)
		}
	}
	for _, id := range []uint64{0, 41, 1 << 63, ^uint64(0)} {
		if r.Get(id) != nil || r.Remove(id) != nil {
			t.Errorf("get/remove(%d) found an object", id)
		}
	}
}

// item is the tests' table entry.
type item struct{ n int }
