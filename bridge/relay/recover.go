package relay

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/goindex/goindex/goindex/ckf"
	"github.com/goindex/goindex/goindex/kv"
)

// CheckpointStats counts a pool's checkpoints and what its start restored
// from one.
type CheckpointStats struct {
	Written uint64 // checkpoints written
	Failed  uint64 // checkpoint writes that failed (logged)
	Bytes   int64  // size of the last checkpoint written
	// RestoredMembers and RestoredBlocks are what the start restored;
	// Kept the members whose publisher's next envelope proved continuity;
	// Cleared those dropped (a gap, a sequence reset, events from another
	// publisher, or no proof within Config.CheckpointGrace).
	RestoredMembers uint64
	RestoredBlocks  uint64
	Kept            uint64
	Cleared         uint64
}

// restoredPublisher is a publisher of the restored checkpoint whose next
// envelope has not been seen: its last sequence and the members restored
// under it.
type restoredPublisher struct {
	seq     uint64
	members []kv.Member
}

// restore applies the pool's checkpoint (Config.CheckpointDir) to its
// empty producer, before the first snapshot is stored: every member's
// mappings (ckf.Producer.AppendLineage, then Restore). The
// members stay on probation: the first envelope of their publisher keeps
// them only when its sequence is the next one (resume), events of another
// publisher for a member drop it first (apply), and those still unproven
// after CheckpointGrace are dropped (expire). A missing, damaged, foreign
// or other-version checkpoint is logged and the pool starts empty.
func (p *pool) restore() {
	c := &p.r.cfg
	if c.CheckpointDir == "" || p.cfg.Source != nil {
		return
	}
	path := checkpointPath(c.CheckpointDir, p.names)
	b, err := readCheckpointFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		p.log.Info("no checkpoint to restore; starting empty", "path", path)
		return
	}
	restored := map[uint64]*restoredPublisher{}
	var st CheckpointStats
	if err == nil {
		err = decodeCheckpoint(b, func(h *checkpointHeader) error {
			if h.Domain != uint64(p.cfg.Domain) || h.DC != uint64(c.DC) || h.Seed != p.format.Seed() || h.Buckets != p.format.Buckets() {
				return fmt.Errorf("%w: pool %d/%d seed %#x × %d buckets, this pool is %d/%d seed %#x × %d", ErrCheckpoint,
					h.Domain, h.DC, h.Seed, h.Buckets, p.cfg.Domain, c.DC, p.format.Seed(), p.format.Buckets())
			}
			p.log.Info("restoring checkpoint", "path", path, "written", h.Written, "publishers", h.Publishers)
			return nil
		}, func(cp *checkpointPublisher) error {
			rp := &restoredPublisher{seq: cp.Sequence}
			for _, m := range cp.Members {
				if err := p.prod.Restore(m.Member, m.Mappings); err != nil && !errors.Is(err, ckf.ErrCapacityExhausted) {
					return fmt.Errorf("%w: %w", ErrCheckpoint, err)
				}
				rp.members = append(rp.members, m.Member)
				st.RestoredMembers++
				st.RestoredBlocks += uint64(len(m.Mappings))
			}
			if _, dup := restored[cp.ID]; dup {
				return fmt.Errorf("%w: publisher %#x twice", ErrCheckpoint, cp.ID)
			}
			restored[cp.ID] = rp
			return nil
		})
	}
	if err != nil {
		p.log.Warn("checkpoint not restored; starting empty", "path", path, "err", err)
		if perr := p.newProducer(); perr != nil { // drop what a failed restore applied
			p.log.Error("checkpoint: new producer", "err", perr)
		}
		return
	}
	p.prod.Drain(nil) // the first snapshot carries the restored words
	p.ckpt = st
	p.restored, p.restoredBy = restored, map[kv.Member]uint64{}
	for pub, rp := range restored {
		src := p.natsSource(pub)
		for _, m := range rp.members {
			p.restoredBy[m], p.pubOf[m], p.owners[m] = pub, pub, src
		}
	}
	p.restoreUntil = time.Now().Add(c.CheckpointGrace)
	p.intake.first = p.resume
	p.log.Info("checkpoint restored; its members wait for their publishers' next events", "members", st.RestoredMembers,
		"blocks", st.RestoredBlocks, "publishers", len(restored), "grace", c.CheckpointGrace)
}

// resume is the continuity test of a restored publisher, told of its first
// envelope since the start (before that envelope's events are applied):
// sequence last+1 proves that nothing was missed, so its members are kept;
// anything else (a gap while the relay was down, or a sequence at or below
// the last one: the worker restarted) drops them. That a publisher's
// sequence counts its kv-events envelopes alone (dynamo-current §1.5: "+1
// per published message", one topic per publisher) is [unverified]; were
// other topics' envelopes counted too, the test would see gaps and clear:
// restored blocks lost, never a wrong one kept.
func (p *pool) resume(pub, seq uint64) {
	rp, ok := p.restored[pub]
	if !ok {
		return
	}
	delete(p.restored, pub)
	proven := seq == rp.seq+1
	var n uint64
	for _, m := range rp.members {
		if p.restoredBy[m] != pub {
			continue // dropped already (events of another publisher)
		}
		delete(p.restoredBy, m)
		n++
		if !proven {
			p.recovered = max(p.recovered, p.dropMember(m))
		}
	}
	if proven {
		p.ckpt.Kept += n
		p.log.Info("restored publisher continues; its members are kept", "publisher", pub, "sequence", seq, "members", n)
		return
	}
	p.ckpt.Cleared += n
	p.log.Info("restored publisher did not continue; its members are cleared", "publisher", pub,
		"checkpoint_sequence", rp.seq, "sequence", seq, "members", n)
}

// unproven drops each restored member of p.evs whose events come from
// another publisher than the one it was restored under (the envelope's,
// p.envPub; 0 for an unsequenced source): a restarted worker's new
// publisher, whose first events would otherwise land on its old state.
func (p *pool) unproven() {
	for i := range p.evs {
		m := p.evs[i].Member
		if pub, ok := p.restoredBy[m]; ok && pub != p.envPub {
			delete(p.restoredBy, m)
			p.ckpt.Cleared++
			p.recovered = max(p.recovered, p.dropMember(m))
			p.log.Info("restored member has events of another publisher; cleared", "member", m, "publisher", p.envPub)
		}
	}
}

// expire drops the restored members still unproven CheckpointGrace after
// the start (their publishers sent nothing since: gone, or idle) and
// reports the cadence step.
func (p *pool) expire(now time.Time) ckf.Step {
	if len(p.restoredBy) == 0 || now.Before(p.restoreUntil) {
		return ckf.StepContinue
	}
	step := ckf.StepContinue
	for m := range p.restoredBy {
		step = max(step, p.dropMember(m))
	}
	p.ckpt.Cleared += uint64(len(p.restoredBy))
	p.log.Info("restored members unproven after the grace; cleared", "members", len(p.restoredBy))
	clear(p.restoredBy)
	clear(p.restored)
	return step
}

// dropMember removes every block of m (a cleared source, an unproven
// restored member) and returns the cadence step; a producer fenced by it is
// rebuilt.
func (p *pool) dropMember(m kv.Member) ckf.Step {
	delete(p.owners, m)
	delete(p.pubOf, m)
	s, err := p.prod.RemoveMember(m)
	if err != nil {
		p.rejected++
	}
	if p.prod.Fenced() != nil {
		p.rebuild()
		return ckf.StepContinue
	}
	return s
}

// checkpoint writes the pool's checkpoint (Config.CheckpointDir): every
// member whose latest events came in a sequenced envelope, under that
// publisher with the last sequence taken from it (or, for a restored
// publisher not heard from yet, the restored one). Members fed otherwise
// (engine feeds, the legacy JSON subject) are left out and start empty
// after a restart.
func (p *pool) checkpoint(now time.Time) {
	c := &p.r.cfg
	if c.CheckpointDir == "" || p.cfg.Source != nil {
		return
	}
	p.lastCheckpoint = now
	byPub := map[uint64][]kv.Member{}
	var pubs []uint64
	for _, m := range p.prod.AppendMembers(nil) {
		pub := p.pubOf[m]
		if _, ok := p.lastSeq(pub); !ok {
			continue
		}
		if byPub[pub] == nil {
			pubs = append(pubs, pub)
		}
		byPub[pub] = append(byPub[pub], m)
	}
	path := checkpointPath(c.CheckpointDir, p.names)
	var lin []ckf.Mapping
	n, err := writeCheckpoint(path, func(cw *checkpointWriter) {
		cw.header(&checkpointHeader{Domain: uint64(p.cfg.Domain), DC: uint64(c.DC), Seed: p.format.Seed(),
			Buckets: p.format.Buckets(), Written: now, Publishers: uint32(len(pubs))})
		for _, pub := range pubs {
			seq, _ := p.lastSeq(pub)
			cw.publisher(pub, seq, uint32(len(byPub[pub])))
			for _, m := range byPub[pub] {
				lin = p.prod.AppendLineage(lin[:0], m)
				cw.member(m, lin)
			}
		}
	})
	if err != nil {
		p.ckpt.Failed++
		p.log.Warn("checkpoint", "err", err)
		return
	}
	p.ckpt.Written++
	p.ckpt.Bytes = n
}

// lastSeq returns the highest envelope sequence taken from publisher pub,
// or the restored one while pub has not been heard from since the start.
func (p *pool) lastSeq(pub uint64) (uint64, bool) {
	if pub == 0 {
		return 0, false
	}
	if st := p.intake.pubs[pub]; st != nil {
		return st.win.top, true
	}
	if rp, ok := p.restored[pub]; ok {
		return rp.seq, true
	}
	return 0, false
}
