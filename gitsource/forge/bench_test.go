package forge

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkCommentBodyCut: a 2 MB change set (a fleet's worth) cut to
// GitHub's 65,536 characters.
func BenchmarkCommentBodyCut(b *testing.B) {
	md := "```diff\n" + strings.Repeat("~ file.config: \"nginx:1.25\" -> \"nginx:1.26\" (région)\n", 40000) + "```\n"
	b.SetBytes(int64(len(md)))
	for b.Loop() {
		_ = commentBody(Comment{StackSet: "web", Markdown: md, FullURL: "https://example.test/web.md"}, MaxCommentChars)
	}
}

type nopForge struct{ Forge }

func (nopForge) Kind() Kind { return GitHub }

// BenchmarkQueueEnqueueCoalesced: 300 stack sets' comments of one pull
// request queued again and again while the forge is away (nothing runs):
// the queue stays at 300 calls.
func BenchmarkQueueEnqueueCoalesced(b *testing.B) {
	q := NewQueue(QueueOptions{Forge: nopForge{}})
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = "comment/7/stack-" + strconv.Itoa(i)
	}
	fn := func(context.Context) (string, error) { return ResultOK, nil }
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q.Enqueue(keys[i%len(keys)], "comment", fn)
	}
	if q.Depth() > len(keys) {
		b.Fatalf("depth %d", q.Depth())
	}
}
