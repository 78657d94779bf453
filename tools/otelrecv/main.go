// Command otelrecv runs the OpenTelemetry Collector's own OTLP receiver
// (go.opentelemetry.io/collector/receiver/otlpreceiver, OTLP/HTTP only)
// and writes every batch of spans it accepts to a file, for provlog's
// trace tests (cmd/provlog TestTracesOTLP): the spans are judged as
// a collector received them, not as a receiver of our own decodes them.
//
// Each batch is appended as a 4-byte big-endian length and the batch as
// OTLP protobuf (TracesData, which is wire-compatible with an
// ExportTraceServiceRequest). The receiver's address is printed on
// stdout once it listens.
//
// Usage: otelrecv -addr 127.0.0.1:0 -out spans.bin
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on for OTLP/HTTP")
	out := flag.String("out", "", "file to append the received batches to")
	flag.Parse()
	if err := run(*addr, *out); err != nil {
		fmt.Fprintln(os.Stderr, "otelrecv:", err)
		os.Exit(1)
	}
}

func run(addr, out string) error {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	// The port is chosen here, so the receiver is given a free one.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	addr = l.Addr().String()
	l.Close()

	var mu sync.Mutex
	var m ptrace.ProtoMarshaler
	sink, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		b, err := m.MarshalTraces(td)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if _, err := f.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b)))); err != nil {
			return err
		}
		if _, err := f.Write(b); err != nil {
			return err
		}
		return f.Sync()
	})
	if err != nil {
		return err
	}
	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	set := receivertest.NewNopSettings(factory.Type())
	r, err := factory.CreateTraces(context.Background(), set, cfg, sink)
	if err != nil {
		return err
	}
	if err := r.Start(context.Background(), componenttestHost{}); err != nil {
		return err
	}
	fmt.Println(addr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return r.Shutdown(context.Background())
}

// componenttestHost is a host with no extensions.
type componenttestHost struct{}

func (componenttestHost) GetExtensions() map[component.ID]component.Component { return nil }
