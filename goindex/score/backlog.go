package score

// Arrival is prefill work a router sent to a candidate after the
// candidate's load was sampled: when it reaches the candidate and the
// prompt tokens it adds to the queue there.
type Arrival struct {
	AtMs   float64 // arrival at the candidate, ms on the caller's clock
	Tokens float64 // prompt tokens it queues for prefill
}

// Backlog returns the prefill tokens a candidate holds queued at atMs by the
// fluid model of a work-conserving queue: the tokens its load report counted
// when sampled at sampledMs, plus every arrival after the sample and not
// after atMs, drained at rate tokens/ms (the candidate's QueueTokensPerMs)
// whenever work is queued. A report is always some way behind the request:
// it was sampled, crossed the WAN, waited for the next decision, and the
// request still has its own one-way trip to make, all while the candidate
// kept working; reading the sample as current overstates the wait by that
// age times the drain rate (about 100 ms on a busy DC at the default 100 ms
// report period).
//
// Arrivals must be in ascending AtMs order; rate ≤ 0 drains nothing. The
// result is what Candidate.ActivePrefillTokens should carry for a request
// arriving at atMs.
func Backlog(queued, sampledMs, rate float64, arrivals []Arrival, atMs float64) float64 {
	q, t := max(queued, 0), sampledMs
	rate = max(rate, 0)
	for _, a := range arrivals {
		if a.AtMs > atMs {
			break
		}
		if a.AtMs <= sampledMs {
			continue // the sample already counted it
		}
		q = max(0, q-(a.AtMs-t)*rate) + max(a.Tokens, 0)
		t = a.AtMs
	}
	if atMs > t {
		q = max(0, q-(atMs-t)*rate)
	}
	return q
}
