package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/cliflags"
)

func tokenCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("token")
	role := fs.String("role", "customer", "customer, merchant or admin")
	sub := fs.String("sub", "", "the caller's id (the token's sub)")
	merchant := fs.String("merchant-id", "", "merchant id, for role merchant")
	lane := fs.String("lane", "", `queue lane of a customer's orders: "priority" for staff or members`)
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	var secret, issuer, audience string
	cliflags.Secret(fs, &secret, "jwt-secret", "ORDERD_JWT_SECRET", "HS256 secret")
	cliflags.JWTClaims(fs, &issuer, &audience)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := app.CheckJWTSecret(secret); err != nil {
		return err
	}
	if *sub == "" {
		return errors.New("--sub is required")
	}
	p := auth.Principal{Subject: *sub, Role: auth.Role(*role), Lane: domain.Lane(*lane)}
	if p.Role == auth.RoleMerchant {
		id, err := uuid.Parse(*merchant)
		if err != nil {
			return errors.New("--merchant-id must be the merchant's UUID for role merchant")
		}
		p.MerchantID = id
	}
	token, err := auth.NewWith(auth.Options{Secret: []byte(secret), Issuer: issuer, Audience: audience}).Issue(p, *ttl)
	if err != nil {
		return fmt.Errorf("issue token: %w", err)
	}
	fmt.Fprintln(stdout, token)
	return nil
}
