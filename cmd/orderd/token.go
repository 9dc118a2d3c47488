package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/auth"
)

func tokenCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	role := fs.String("role", "customer", "customer, merchant or admin")
	sub := fs.String("sub", "", "the caller's id (the token's sub)")
	merchant := fs.String("merchant-id", "", "merchant id, for role merchant")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	secret := fs.String("jwt-secret", os.Getenv("ORDERD_JWT_SECRET"), "HS256 secret (ORDERD_JWT_SECRET)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secret == "" {
		return errors.New("ORDERD_JWT_SECRET (or --jwt-secret) is required")
	}
	if *sub == "" {
		return errors.New("--sub is required")
	}
	p := auth.Principal{Subject: *sub, Role: auth.Role(*role)}
	if p.Role == auth.RoleMerchant {
		id, err := uuid.Parse(*merchant)
		if err != nil {
			return errors.New("--merchant-id must be the merchant's UUID for role merchant")
		}
		p.MerchantID = id
	}
	token, err := auth.New([]byte(*secret), nil).Issue(p, *ttl)
	if err != nil {
		return fmt.Errorf("issue token: %w", err)
	}
	fmt.Fprintln(stdout, token)
	return nil
}
