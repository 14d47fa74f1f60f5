package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/bridge/route"
	"github.com/goindex/goindex/bridge/trace"
	"github.com/goindex/goindex/dynamo"
)

// maxSSELineBytes bounds one line of a streamed answer.
const maxSSELineBytes = 1 << 20

// answer is what one completion through the router returned: the router's
// diagnostic headers, the stub's own headers and the streamed events.
type answer struct {
	header      http.Header
	dc          string // X-Goindex-DC
	servedBy    string // the stub's HeaderServedBy
	routerCache int    // X-Goindex-Cached-Tokens
	engineCache int    // the stub's HeaderEngineCached
	events      []time.Duration
	text        string
}

// completion sends one prompt of Mooncake hash ids through the router at
// base and checks the answer: status 200, served by the DC the router
// named, and for a stream every event up to [DONE] with the usage.
func completion(ctx context.Context, client *http.Client, base string, ids []uint64, stream bool, maxTokens int) (*answer, error) {
	tokens := dynamo.MooncakeTokens(nil, ids, blockSize)
	body, err := json.Marshal(map[string]any{"model": "demo", "prompt": tokens, "stream": stream, "max_tokens": maxTokens})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, checkf("completion of %d blocks: status %d: %s", len(ids), resp.StatusCode, strings.TrimSpace(string(b)))
	}
	a := &answer{header: resp.Header, dc: resp.Header.Get(route.HeaderDC), servedBy: resp.Header.Get(HeaderServedBy)}
	a.routerCache, _ = strconv.Atoi(resp.Header.Get(route.HeaderCachedTokens))
	a.engineCache, _ = strconv.Atoi(resp.Header.Get(HeaderEngineCached))
	if a.dc == "" || a.dc != a.servedBy {
		return nil, checkf("the router named DC %q but %q served the request", a.dc, a.servedBy)
	}
	var usage completionBody
	if !stream {
		if err := json.NewDecoder(resp.Body).Decode(&usage); err != nil {
			return nil, checkf("completion answer: %v", err)
		}
	} else {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, maxSSELineBytes)
		done := false
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			a.events = append(a.events, time.Since(sent))
			if data == "[DONE]" {
				done = true
				break
			}
			var ch completionBody
			if err := json.Unmarshal([]byte(data), &ch); err != nil {
				return nil, checkf("stream event %q: %v", data, err)
			}
			if len(ch.Choices) > 0 {
				a.text += ch.Choices[0].Text
			}
			if ch.Usage != nil {
				usage.Usage = ch.Usage
			}
		}
		if err := sc.Err(); err != nil || !done {
			return nil, checkf("stream ended after %d events without [DONE] (%v)", len(a.events), err)
		}
	}
	if usage.Usage == nil || usage.Usage.PromptTokens != len(tokens) || usage.Usage.Details.CachedTokens != a.engineCache {
		return nil, checkf("answer's usage %+v does not match the prompt (%d tokens) and the engine's cached %d", usage.Usage, len(tokens), a.engineCache)
	}
	if !stream && len(usage.Choices) > 0 {
		a.text = usage.Choices[0].Text
	}
	return a, nil
}

// completionBody is the part of a completion answer (or of one stream
// event) the demo checks.
type completionBody struct {
	Usage *struct {
		PromptTokens int `json:"prompt_tokens"`
		Details      struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Choices []struct {
		Text string `json:"text"`
	} `json:"choices"`
}

// dcTally is one DC's share of the replay.
type dcTally struct {
	Requests     int   `json:"requests"`
	RouterCached int64 `json:"router_cached_tokens"` // cached tokens the router expected
	EngineCached int64 `json:"engine_cached_tokens"` // cached tokens the engines had
	PromptTokens int64 `json:"prompt_tokens"`
}

// replayResult is what the replay through the router did.
type replayResult struct {
	mu        sync.Mutex
	perDC     map[string]*dcTally
	done      int
	streamed  int
	fallbacks int
}

func (r *replayResult) add(a *answer, promptTokens int, stream bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.perDC[a.dc]
	if t == nil {
		t = &dcTally{}
		r.perDC[a.dc] = t
	}
	t.Requests++
	t.RouterCached += int64(a.routerCache)
	t.EngineCached += int64(a.engineCache)
	t.PromptTokens += int64(promptTokens)
	r.done++
	if stream {
		r.streamed++
	}
	if a.header.Get(route.HeaderFallback) != "" {
		r.fallbacks++
	}
}

// snapshot returns the completed count and the per-DC requests so far.
func (r *replayResult) snapshot() (int, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]int, len(r.perDC))
	for dc, t := range r.perDC {
		m[dc] = t.Requests
	}
	return r.done, m
}

// streamEvery makes every streamEvery-th replayed request a streaming one.
const streamEvery = 4

// replay sends reqs through the router at base from concurrency closed-loop
// clients in trace order, calling progress at most every period. It stops
// at the first failed request.
func replay(ctx context.Context, client *http.Client, base string, reqs []trace.Request, concurrency int,
	period time.Duration, progress func(*replayResult)) (*replayResult, error) {
	res := &replayResult{perDC: map[string]*dcTally{}}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				stream := i%streamEvery == streamEvery-1
				a, err := completion(ctx, client, base, reqs[i].HashIDs, stream, min(reqs[i].OutputLength, maxStreamChunks))
				if err != nil {
					cancel(fmt.Errorf("request %d of the trace: %w", i, err))
					return
				}
				res.add(a, len(reqs[i].HashIDs)*blockSize, stream)
			}
		}()
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
feed:
	for i := range reqs {
		for {
			select {
			case next <- i:
				continue feed
			case <-ctx.Done():
				break feed
			case <-tick.C:
				progress(res)
			}
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return res, err
	}
	return res, nil
}
