package ckf_test

import (
	"fmt"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
)

// Example shows a relay's loop: apply events, drain at each boundary the
// cadence asks for, and publish the images.
func Example() {
	n, _ := ckf.BucketCount(1024)
	f, _ := ckf.NewFormat(ckf.DefaultSeed, n)
	p, _ := ckf.New(ckf.Config{Format: f, BatchEvents: 2})
	snapshot := p.AppendWords(nil) // a consumer starts from a snapshot

	worker := kv.Member{Worker: 7}
	events := []kv.Event{
		{Member: worker, Kind: kv.Stored, Blocks: []kv.Block{{External: 0xA, Local: 11}, {External: 0xB, Local: 12}}},
		{Member: worker, Kind: kv.Stored, HasParent: true, Parent: 0xB, Blocks: []kv.Block{{External: 0xC, Local: 13}}},
		{Member: worker, Kind: kv.Removed, Removed: []uint64{0xC}},
	}
	var batch []ckf.Image
	for i := range events {
		step, err := p.Apply(&events[i])
		if err != nil {
			fmt.Println("event", i, err)
		}
		switch step {
		case ckf.StepArmTimer:
			fmt.Println("event", i, "opens a window: arm the", p.FlushAfter(), "timer")
		case ckf.StepPublish:
			batch = p.Drain(batch[:0])
			fmt.Println("event", i, "ends a window:", len(batch), "images")
			for _, im := range batch {
				snapshot[im.Bucket] = im.Word
			}
		}
	}
	batch = p.Drain(batch[:0]) // the timer fired
	for _, im := range batch {
		snapshot[im.Bucket] = im.Word
	}
	s := p.Stats()
	fmt.Println("tracked", s.TrackedBlocks, "resident", s.Resident, "replica in step:", fmt.Sprint(snapshot) == fmt.Sprint(p.AppendWords(nil)))
	// Output:
	// event 0 opens a window: arm the 1ms timer
	// event 1 ends a window: 3 images
	// event 2 opens a window: arm the 1ms timer
	// tracked 2 resident 2 replica in step: true
}
