// Command server runs the zitadel/oidc library's example OpenID
// Provider (its op package, the example's login app and its in-memory
// example storage, all from github.com/zitadel/oidc/v3 v3.52.0) for
// provlog's tests, on a loopback port the kernel picks. It prints
// "issuer URL" on its first line of stdout once it is listening.
//
// Two settings are ours, not the example's: the users come from the
// file given with -users (the example reads the same format from
// USERS_FILE), and the clients registered with -client issue JWT access
// tokens (the example's clients all issue opaque ones, a field the
// example package does not export; the op package itself supports
// both). Everything a token holds, including the "act" claim of a
// token exchange, is written by the library and its example storage.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// jwtStorage is the example storage whose clients issue JWT access tokens.
type jwtStorage struct{ *storage.Storage }

func (s jwtStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func main() {
	users := flag.String("users", "", "users file (the example's USERS_FILE format)")
	var clients []string
	flag.Func("client", "id:secret of a web client (repeatable)", func(v string) error {
		clients = append(clients, v)
		return nil
	})
	redirect := flag.String("redirect", "http://127.0.0.1/callback", "the clients' redirect URI")
	flag.Parse()
	if err := serve(*users, clients, *redirect); err != nil {
		fmt.Fprintln(os.Stderr, "zitadel example OP:", err)
		os.Exit(1)
	}
}

func serve(usersFile string, clients []string, redirect string) error {
	store, err := storage.StoreFromFile(usersFile)
	if err != nil {
		return err
	}
	for _, c := range clients {
		id, secret, ok := strings.Cut(c, ":")
		if !ok {
			return fmt.Errorf("-client %q: want id:secret", c)
		}
		storage.RegisterClients(storage.WebClient(id, secret, redirect))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	issuer := "http://" + ln.Addr().String() + "/"
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(issuer, jwtStorage{storage.NewStorage(store)}, logger, false)
	fmt.Println("issuer", issuer)
	return http.Serve(ln, router)
}
