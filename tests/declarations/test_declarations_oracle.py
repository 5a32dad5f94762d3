"""Oracle test: proctor.declarations against git 2.39's own hunk-header (funcname) search.

For every sample file, `git diff -U0` is run twice against a commit of it: once with every
even line replaced, once with every odd line replaced. With -U0 each changed line is a hunk of
its own, and git prints after its `@@ ... @@` the header of the nearest line at or above the
line before the hunk that its funcname patterns match, in the OLD file. So between the two
diffs git tells, for (nearly) every line L, the header of the declaration above L. proctor's
prediction for the same hunk is taken from `Rules.headers(old bytes)`: the header of the
nearest declaration line at or above line L-1. The two must agree for every hunk.

git is run with GIT_CONFIG_GLOBAL=/dev/null, GIT_CONFIG_NOSYSTEM=1 and LC_ALL=C; the drivers
apply through a .gitattributes in a throwaway repository. git has no javascript/typescript
driver, so those are configured to proctor's own pattern (PROCTOR_OWN), which makes git
evaluate proctor's ERE. Every sample, shuffle and probe lives in one repository built once
per module, so git runs only a handful of times.
"""

from __future__ import annotations

import bisect
import os
import random
import re
import subprocess

import pytest

from proctor import declarations
from proctor.declarations import BUILTIN, PROCTOR_OWN, Rules, configured, read_config

GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "LC_ALL": "C",
    "GIT_TERMINAL_PROMPT": "0",
}


def _git(cwd, *args) -> bytes:
    argv = [
        b"git",
        b"-c",
        b"user.name=oracle",
        b"-c",
        b"user.email=oracle@example.invalid",
        b"-c",
        b"core.autocrlf=false",
        b"-c",
        b"core.hooksPath=/dev/null",
    ]
    argv += [a if isinstance(a, bytes) else a.encode("utf-8") for a in args]
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, env=GIT_ENV, timeout=60)
    assert proc.returncode == 0, (args, proc.stderr.decode("utf-8", "replace"))
    return proc.stdout


def _src(text: str) -> bytes:
    return text.lstrip("\n").encode("utf-8")


def _tabs(text: str) -> str:
    """Leading groups of four spaces as tabs (Go, C and devicetree are tab-indented)."""
    out = []
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        depth = (len(line) - len(stripped)) // 4
        out.append("\t" * depth + " " * ((len(line) - len(stripped)) % 4) + stripped)
    return "\n".join(out)


# -- the samples ---------------------------------------------------------------------------------

PYTHON = _src(r'''
#!/usr/bin/env python3
"""Inventory service: a small but realistic module.

    def example():  (a docstring line git's pattern matches too)
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Iterable

DEFAULT_LIMIT = 50
class_registry: dict[str, type] = {}
define = "not a def"


def register(cls):
    """Class decorator that records the class by name."""
    class_registry[cls.__name__] = cls
    return cls


@register
@dataclasses.dataclass(frozen=True)
class Item:
    sku: str
    quantity: int = 0

    @property
    def empty(self) -> bool:
        return self.quantity == 0

    def restock(self, amount: int) -> "Item":
        if amount < 0:
            raise ValueError("negative restock")
        return dataclasses.replace(self, quantity=self.quantity + amount)


class Inventory(Iterable[Item]):
    """Items by SKU."""

    class NotFound(KeyError):
        pass

    def __init__(self, items=()):
        self._items = {item.sku: item for item in items}

    def __iter__(self):
        return iter(self._items.values())

    def get(self, sku):
        try:
            return self._items[sku]
        except KeyError:
            raise self.NotFound(sku) from None

    async def refresh(self, source):
        async with source.session() as session:
            for row in await session.fetch_all():
                self._items[row.sku] = Item(row.sku, row.qty)

    async	def drain(self):
        while self._items:
            await asyncio.sleep(0)
            self._items.popitem()


def _helper_with_a_really_long_name_to_reach_the_eighty_byte_limit(argument_one, argument_two):
    def inner(x):
        return x * 2

    lambda_value = lambda y: inner(y)  # noqa: E731
    return lambda_value(argument_one) + argument_two


def	tabbed(): pass
classy = "class Fake:"


if __name__ == "__main__":
    asyncio.run(Inventory().refresh(None))
''')

GOLANG = _src(
    _tabs(r"""
// Package store keeps records in memory.
package store

import (
    "context"
    "errors"
    "sync"
)

const DefaultLimit = 50

const (
    modeRead = iota
    modeWrite
)

var ErrNotFound = errors.New("not found")

var (
    mu    sync.Mutex
    cache = map[string]*Record{}
)

type ID string

type Record struct {
    ID    ID
    Value []byte
}

type Store interface {
    Get(ctx context.Context, id ID) (*Record, error)
    Put(ctx context.Context, r *Record) error
}

type (
    Option   func(*memStore)
    memStore struct {
        records map[ID]*Record
    }
)

type Handler interface { // an interface, not a struct
}

type Pair[K comparable, V any] struct{ Key K; Value V }

// New makes a store.
func New(opts ...Option) Store {
    s := &memStore{records: map[ID]*Record{}}
    for _, opt := range opts {
        opt(s)
    }
    return s
}

func (s *memStore) Get(ctx context.Context, id ID) (*Record, error) {
    mu.Lock()
    defer mu.Unlock()
    r, ok := s.records[id]
    if !ok {
        return nil, ErrNotFound
    }
    return r, nil
}

func (s *memStore) Put(ctx context.Context, r *Record) error {
    cleanup := func() {
        mu.Unlock()
    }
    mu.Lock()
    defer cleanup()
    s.records[r.ID] = r
    return nil
}

func WithRecords(rs ...*Record) Option {
    return func(s *memStore) {
        for _, r := range rs {
            s.records[r.ID] = r
        }
    }
}

func Map[T, U any](xs []T, f func(T) U) []U {
    out := make([]U, 0, len(xs))
    for _, x := range xs {
        out = append(out, f(x))
    }
    return out
}

func	tabbed() {
    functions := []string{"a"}
    _ = functions
    type local struct{ x int }
    _ = local{}
}
""")
)

RUST = _src(r"""
//! Geometry utilities.
use std::fmt;

pub const ORIGIN: Point = Point { x: 0.0, y: 0.0 };

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

pub(crate) struct Cache<T> {
    items: Vec<T>,
}

enum Shape {
    Circle { center: Point, radius: f64 },
    Polygon(Vec<Point>),
}

pub trait Area {
    fn area(&self) -> f64;
    fn describe(&self) -> String {
        format!("area {}", self.area())
    }
}

impl Area for Shape {
    fn area(&self) -> f64 {
        match self {
            Shape::Circle { radius, .. } => std::f64::consts::PI * radius * radius,
            Shape::Polygon(points) => shoelace(points),
        }
    }
}

impl<T: Clone> Cache<T> {
    pub fn new() -> Self {
        Cache { items: Vec::new() }
    }

    pub(crate) fn push(&mut self, item: T) {
        self.items.push(item);
    }

    pub async fn flush(&mut self) -> usize {
        let n = self.items.len();
        self.items.clear();
        n
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.x, self.y)
    }
}

fn shoelace(points: &[Point]) -> f64 {
    let mut sum = 0.0;
    for (a, b) in points.iter().zip(points.iter().cycle().skip(1)) {
        sum += a.x * b.y - b.x * a.y;
    }
    (sum / 2.0).abs()
}

macro_rules! point {
    ($x:expr, $y:expr) => {
        Point { x: $x, y: $y }
    };
}

extern "C" {
    fn abs(input: i32) -> i32;
}

#[no_mangle]
pub extern "C" fn point_norm(x: f64, y: f64) -> f64 {
    (x * x + y * y).sqrt()
}

pub unsafe fn raw_read(ptr: *const u8) -> u8 {
    *ptr
}

pub const unsafe fn two_qualifiers() -> u8 {
    0
}

pub(super) mod tests {
    use super::*;

    #[test]
    fn test_area() {
        let s = Shape::Circle { center: point!(0.0, 0.0), radius: 1.0 };
        assert!(s.area() > 3.0);
    }
}

union IntOrFloat { i: u32, f: f32 }
const fn square(x: u32) -> u32 { x * x }
""")

JAVA = _src(r"""
package com.example.shop;

import java.util.*;
import java.util.function.Function;

/**
 * Orders and their totals.
 */
@SuppressWarnings("unchecked")
public class OrderService implements AutoCloseable {
    private static final int LIMIT = 100;
    private final Map<String, List<Order>> byCustomer = new HashMap<>();

    public enum Status { NEW, PAID, SHIPPED }

    public interface Listener {
        void onOrder(Order order);
    }

    static final class Order {
        final String id;
        final double amount;

        Order(String id, double amount) {
            this.id = id;
            this.amount = amount;
        }
    }

    @Override
    public void close() {
        byCustomer.clear();
    }

    public synchronized Order place(String customer, double amount) throws IllegalStateException {
        if (amount <= 0) {
            throw new IllegalStateException("amount");
        }
        Order order = new Order(UUID.randomUUID().toString(), amount);
        byCustomer.computeIfAbsent(customer, k -> new ArrayList<>()).add(order);
        return order;
    }

    double total(String customer) {
        return byCustomer.getOrDefault(customer, List.of()).stream().mapToDouble(o -> o.amount).sum();
    }

    public static <T extends Comparable<T>> T max(List<T> items) {
        T best = null;
        for (T item : items) {
            if (best == null || item.compareTo(best) > 0) {
                best = item;
            }
        }
        return best;
    }

    protected Map<String, Integer> counts(Function<Order, String> key,
                                          boolean includeEmpty) {
        Map<String, Integer> out = new TreeMap<>();
        while (includeEmpty && out.isEmpty()) {
            out.put("", 0);
        }
        return out;
    }

    @Deprecated(since = "2")
    private int[] sizes() { return new int[0]; }

    abstract static class Base<K, V> {
        abstract V lookup(K key);

        final Optional<V> find(K key) {
            return Optional.ofNullable(lookup(key));
        }
    }
}

interface Auditor {
    default void audit(Object o) {
        System.out.println(o);
    }
}

record Point(int x, int y) {}
""")

C_SOURCE = _src(
    _tabs(r"""
/* ring buffer */
#include <stdio.h>
#include <stdlib.h>
#include "ring.h"

#define RING_MAX 64

static int verbose = 0;

struct ring {
    size_t head;
    size_t tail;
    int data[RING_MAX];
};

typedef enum {
    RING_OK,
    RING_FULL,
} ring_status;

static inline size_t
ring_next(size_t i)
{
    return (i + 1) % RING_MAX;
}

ring_status ring_push(struct ring *r, int value)
{
    size_t next = ring_next(r->head);
    if (next == r->tail)
        goto full;
    r->data[r->head] = value;
    r->head = next;
    return RING_OK;
full:
    if (verbose)
        fprintf(stderr, "ring full\n");
    return RING_FULL;
}

int ring_pop(struct ring *r, int *out)
{
    switch (*out) {
    case 0:
        break;
    default:
        break;
    }
    if (r->head == r->tail) {
        goto empty;
    }
    *out = r->data[r->tail];
    r->tail = ring_next(r->tail);
    return 1;
empty: /* nothing to pop */
    return 0;
retry: return -1;
}

int main(int argc, char **argv)
{
    struct ring r = { 0 };
    for (int i = 0; i < argc; i++) {
        ring_push(&r, atoi(argv[i]));
    }
cleanup:	// done
    return 0;
}
""")
)

C_HEADER = _src(r"""
#ifndef RING_H
#define RING_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An opaque ring. */
struct ring;

typedef struct ring_stats {
    size_t pushes;
    size_t pops;
} ring_stats;

enum ring_mode { RING_BLOCK, RING_DROP };

int ring_push(struct ring *r, int value);
int ring_pop(struct ring *r, int *out);
static inline int ring_empty(const struct ring *r) { return r == NULL; }

#define RING_DEBUG(fmt, ...) \
    fprintf(stderr, fmt, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* RING_H */
""")

CPP = _src(r"""
// shapes.cpp
#include <memory>
#include <string>
#include <vector>

namespace geo {

template <typename T>
struct Vec2 {
    T x, y;
};

class Shape {
public:
    virtual ~Shape() = default;
    virtual double area() const = 0;
  protected:
    std::string name_;
private:
    int id_ = 0;
};

class Circle : public Shape {
  public:
    explicit Circle(double r) : r_(r) {}
    double area() const override;

  private:
    double r_;
};

double Circle::area() const
{
    return 3.14159 * r_ * r_;
}

Circle::Circle(const Circle& other) : Shape(other), r_(other.r_)
{
}

std::unique_ptr<Shape> make_circle(double r)
{
    return std::make_unique<Circle>(r);
}

template <typename T>
T sum(const std::vector<T>& xs)
{
    T total{};
    for (const auto& x : xs) {
        total += x;
    }
    return total;
}

Vec2<int> operator+(Vec2<int> a, Vec2<int> b)
{
    return {a.x + b.x, a.y + b.y};
}

}  // namespace geo

::geo::Vec2<int> origin()
{
    return {0, 0};
}

int main()
{
    auto c = geo::make_circle(2.0);
    if (c->area() > 10.0) {
        goto done;
    }
    auto f = [](int x) { return x * 2; };
done:
    return f(0);
}
""")

MARKDOWN = _src(r"""
# Project Title

Intro paragraph with a #hashtag that is not a heading.

## Installation

Run the installer:

```sh
# this comment inside a fence is matched by git's pattern too
./install.sh --prefix /usr/local
```

### From source

    #### indented four spaces: a code block, not a heading

Build it with `make`.

#### Notes ####

   ### three-space indent heading

Some notes.

##### Deep

###### Deepest

####### seven hashes is not a heading

#NoSpace is not a heading

Setext heading
==============

Another setext
--------------

## API	Reference

- item one
- item two

### `Rules.headers(data)`

Returns a mapping.

> # quoted heading is not a heading

## FAQ

Done.
""")

JAVASCRIPT = _src(r"""
'use strict';

import { readFile } from 'fs/promises';

const DEFAULT_TIMEOUT = 5000;
let counter = 0;
var legacy = true;

export const add = (a, b) => a + b;

export async function loadConfig(path) {
  const text = await readFile(path, 'utf8');
  if (!text) {
    return {};
  }
  return JSON.parse(text);
}

function* ids() {
  while (true) {
    yield counter++;
  }
}

export default class Queue {
  #items = [];
  static instances = 0;

  constructor(limit = 10) {
    this.limit = limit;
    Queue.instances += 1;
  }

  get size() {
    return this.#items.length;
  }

  push(item) {
    if (this.#items.length >= this.limit) {
      throw new Error('full');
    }
    this.#items.push(item);
  }

  async *drain() {
    while (this.#items.length) {
      yield this.#items.shift();
    }
  }

  #validate(item) {
    switch (typeof item) {
      case 'object':
        return item !== null;
      default:
        return true;
    }
  }
}

const handlers = {
  onOpen(event) {
    console.log('open', event);
  },
  onClose: function (event) {
    console.log('close', event);
  },
};

export const fetchAll = async (urls) => {
  try {
    return await Promise.all(urls.map((u) => fetch(u)));
  } catch (err) {
    console.error(err);
    return [];
  } finally {
    counter = 0;
  }
};

setTimeout(() => {
  for (const h of Object.values(handlers)) {
    h({});
  }
}, DEFAULT_TIMEOUT);

module.exports = { add, ids, legacy };
""")

TYPESCRIPT = _src(r"""
import type { Request } from './http';

export interface User {
  id: number;
  name: string;
  email?: string;
}

export type Role = 'admin' | 'member';
type Pair<A, B> = [A, B];

export enum Level {
  Low = 1,
  High,
}

declare const VERSION: string;

export namespace Util {
  export function clamp(x: number, lo: number, hi: number): number {
    return Math.min(Math.max(x, lo), hi);
  }
}

export abstract class Repository<T extends { id: number }> {
  protected readonly items = new Map<number, T>();

  constructor(private readonly name: string) {}

  abstract validate(item: T): boolean;

  public save(item: T): void {
    if (!this.validate(item)) {
      throw new Error(`invalid ${this.name}`);
    }
    this.items.set(item.id, item);
  }

  find<K extends keyof T>(key: K, value: T[K]): T | undefined {
    for (const item of this.items.values()) {
      if (item[key] === value) {
        return item;
      }
    }
    return undefined;
  }

  static override create(): void {
  }
}

class UserRepository extends Repository<User> {
  validate(user: User): boolean {
    return user.name.length > 0;
  }

  async load(req: Request): Promise<User[]> {
    const rows = await fetch(req.url).then((r) => r.json());
    return rows.map((row: User) => ({ ...row }));
  }

  private get count(): number {
    return this.items.size;
  }
}

export const toPair = <A, B>(a: A, b: B): Pair<A, B> => [a, b];

export function isAdmin(user: User & { role?: Role }): user is User {
  return user.role === 'admin';
}

declare module 'express' {
  interface Request {
    user?: User;
  }
}

let cached: User | null = null;
""")

CSHARP = _src(r"""
using System;
using System.Collections.Generic;

namespace Shop.Billing
{
    [Serializable]
    public sealed class Invoice : IDisposable
    {
        private readonly List<decimal> _lines = new List<decimal>();

        public string Number { get; }

        public Invoice(string number)
        {
            Number = number;
        }

        public decimal Total
        {
            get { return Sum(); }
        }

        private decimal Sum()
        {
            decimal total = 0;
            foreach (var line in _lines)
            {
                if (line > 0)
                {
                    total += line;
                }
            }
            return total;
        }

        public static async Task<Invoice> LoadAsync(string id)
        {
            await Task.Delay(1);
            return new Invoice(id);
        }

        public void Dispose() => _lines.Clear();

        internal enum State { Open, Closed }

        public record Line(string Sku, decimal Amount);
    }

    public interface IRepository<T> where T : class
    {
        T Find(int id);
    }
}
""")

RUBY = _src(r"""
# frozen_string_literal: true

require 'json'

module Billing
  class Invoice
    attr_reader :lines

    def initialize(lines = [])
      @lines = lines
    end

    def total
      lines.sum(&:amount)
    end

    def self.load(path)
      new(JSON.parse(File.read(path)))
    end

    class << self
      def empty
        new([])
      end
    end

    private

    def validate!
      raise ArgumentError, 'empty' if lines.empty?
    end
  end

  module_function

  def default_currency = 'EUR'
end

class Billing::Receipt < Billing::Invoice; end
""")

PERL = _src(r"""
#!/usr/bin/perl
package Inventory::Item;
use strict;
use warnings;

BEGIN {
    our $VERSION = '1.0';
}

sub new {
    my ($class, %args) = @_;
    return bless {%args}, $class;
}

sub quantity($) : lvalue {
    my $self = shift;
    $self->{quantity};
}

sub restock { # add some
    my ($self, $n) = @_;
    $self->{quantity} += $n;
}

sub Inventory::Item::name {
    return $_[0]{name};
}

END { print "done\n" }

DESTROY {
}

1;

__END__

=head1 NAME

Inventory::Item - an item

=head2 Methods

=cut
""")

PHP = _src(r"""
<?php

namespace App\Models;

use Illuminate\Support\Collection;

interface HasTotal
{
    public function total(): float;
}

trait Timestamps
{
    protected ?string $createdAt = null;

    public function touch(): void
    {
        $this->createdAt = date('c');
    }
}

abstract class Model
{
    abstract protected function table(): string;
}

final class Order extends Model implements HasTotal
{
    use Timestamps;

    private array $lines = [];

    public function __construct(private int $id)
    {
    }

    protected function table(): string
    {
        return 'orders';
    }

    public static function find(int $id): ?self
    {
        return new self($id);
    }

    public function total(): float
    {
        $sum = fn ($line) => $line['amount'];
        return array_sum(array_map($sum, $this->lines));
    }
}

enum Status: string
{
    case Open = 'open';
}

function helper(Collection $c)
{
    return $c->count();
}
""")

KOTLIN = _src(r"""
package shop

import kotlin.math.max

data class Item(val sku: String, val qty: Int)

interface Repository<T> {
    fun find(id: String): T?
}

sealed class Result {
    object Empty : Result()
    class Value(val item: Item) : Result()
}

class MemoryRepository : Repository<Item> {
    private val items = mutableMapOf<String, Item>()

    override fun find(id: String): Item? = items[id]

    fun put(item: Item) {
        items[item.sku] = item
    }

    private suspend fun refresh() {
        val total = items.values.fold(0) { acc, i -> max(acc, i.qty) }
        println(total)
    }

    companion object {
        fun empty() = MemoryRepository()
    }
}

fun main(args: Array<String>) {
    val repo = MemoryRepository()
    repo.put(Item("a", 1))
}

inline fun <reified T> typeName(): String = T::class.java.name
""")

BASH = _src(r"""
#!/usr/bin/env bash
set -euo pipefail

readonly PREFIX=/usr/local

log() {
    printf '%s\n' "$*" >&2
}

function die {
    log "error: $*"
    exit 1
}

function cleanup() {
    rm -rf "$TMPDIR"
}

install_files () {
    local src=$1
    for f in "$src"/*; do
        cp "$f" "$PREFIX/bin/"
    done
}

check_deps() (
    command -v git >/dev/null || die "git missing"
)

is_ready() [[ -d "$PREFIX" ]]

main() { [[ $# -gt 0 ]] || die "usage"; install_files "$1"; }

trap cleanup EXIT
main "$@"
""")

CSS = _src(r"""
@import url("base.css");

:root {
  --accent: #c33;
}

body,
html {
  margin: 0;
}

.card > .title:hover {
  color: var(--accent);
}

#main {
  display: grid;
}

@media (max-width: 600px) {
  .card {
    padding: 4px;
  }
}

a:visited,
A.External {
  text-decoration: none;
}

h1::before { content: "#"; }
""")

HTML = _src(r"""
<!DOCTYPE html>
<html>
<head>
  <title>Docs</title>
</head>
<body>
  <h1 class="title">Guide</h1>
  <p>Intro</p>
  <H2>Install</H2>
  <p>Run it.</p>
  <h3 id="x">Details
  </h3>
  <h7>not a heading</h7>
  <div><h4>Nested</h4></div>
  <h2>Usage</h2>
  <p>End.</p>
</body>
</html>
""")

TEX = _src(r"""
\documentclass{article}
\begin{document}
\part{Intro}
\chapter{Start}
\section{Overview}
Some text.
\subsection*{Details}
More text.
\subsubsection{Deep}
Even more text.
\paragraph{not matched}
\section {spaced, not matched}
\section*{Starred}
Closing words.
\end{document}
""")

OBJC = _src(r"""
#import <Foundation/Foundation.h>

@interface Counter : NSObject
@property (nonatomic) NSInteger value;
- (void)increment;
+ (instancetype)counterWithValue:(NSInteger)value;
@end

@implementation Counter

- (void)increment {
    if (self.value < 100) {
        self.value += 1;
    }
}

+ (instancetype)counterWithValue:(NSInteger)value
{
    Counter *c = [[Counter alloc] init];
    c.value = value;
    return c;
}

static int helper(int x)
{
    return x * 2;
}

@end

int main(int argc, const char *argv[]) {
    @autoreleasepool {
        return helper(argc);
    }
}
""")

FORTRAN = _src(r"""
      PROGRAM MAIN
C     fixed-form comment line
      INTEGER N
      CALL GREET(N)
      END PROGRAM MAIN

module geometry
  implicit none
contains
  pure real function area(r)
    real, intent(in) :: r
    area = 3.14159 * r * r
  end function area

  subroutine show(x)
    real :: x
    ! a comment: subroutine fake
    print *, x
  end subroutine show

  module procedure helper
end module geometry

recursive subroutine walk(n)
  integer :: n
  if (n > 0) call walk(n - 1)
end subroutine walk
""")

ADA = _src(r"""
with Ada.Text_IO; use Ada.Text_IO;

package body Shapes is

   function Area (S : Shape) return Float is
   begin
      return S.W * S.H;
   end Area;

   procedure Print (S : Shape) is
   begin
      Put_Line (Float'Image (Area (S)));
   end Print;

   package Int_IO is new Ada.Text_IO.Integer_IO (Integer);

   task type Worker is
      entry Start;
   end Worker;

   protected Counter is
      procedure Increment;
   private
      Value : Natural := 0;
   end Counter;

   PROCEDURE Shout is separate;

   function Twice (X : Integer) return Integer renames Double;
end Shapes;
""")

ELIXIR = _src(r"""
defmodule Shop.Cart do
  @moduledoc "A cart."

  defstruct items: []

  def new, do: %__MODULE__{}

  def add(cart, item) do
    %{cart | items: [item | cart.items]}
  end

  defp total(items) do
    Enum.sum(items)
  end

  defmacro debug(expr) do
    quote do: IO.inspect(unquote(expr))
  end
end

defimpl String.Chars, for: Shop.Cart do
  def to_string(cart), do: "cart(#{length(cart.items)})"
end

defprotocol Priced do
  def price(x)
end

test "adds items" do
  assert true
end
""")

PASCAL = _src(r"""
unit Shapes;

interface

type
  TShape = class
    function Area: Double; virtual; abstract;
  end;
  TPoint = record
    X, Y: Integer;
  end;

implementation

function TShape.Describe: string;
begin
  Result := 'shape';
end;

procedure Draw(S: TShape);
var
  A: Double;
begin
  A := S.Area;
end;

constructor TCircle.Create(R: Double);
begin
  FRadius := R;
end;

class procedure TShape.Reset;
begin
end;

initialization
  Draw(nil);
finalization
end.
""")

SCHEME = _src(r"""
;; geometry
(define pi 3.14159)

(define (area r)
  (* pi r r))

(define-record-type point
  (make-point x y)
  point?)

(define-syntax swap!
  (syntax-rules ()
    ((_ a b) (let ((tmp a)) (set! a b) (set! b tmp)))))

(library (shapes)
  (export area))

(module util racket
  (provide twice))

(defstruct circle radius)
(struct posn (x y))
(display (area 2))
""")

MATLAB = _src(r"""
%% Section one
function y = square(x)
    y = x .^ 2;
end

classdef Counter < handle
    properties
        Value = 0
    end
    methods
        function increment(obj)
            obj.Value = obj.Value + 1;
        end
    end
end

## Octave section
%%% Another section
% plain comment
x = square(3);
disp(x)
""")

BIBTEX = _src(r"""
@article{knuth1984,
  author = {Donald Knuth},
  title = {Literate Programming},
  year = 1984,
}

@Book{ lamport94,
  author = "Leslie Lamport",
  title = {LaTeX},
}

@misc{web, note = "x"}

@string{ acm = "ACM" }
Text after @inproceedings{inline, in the middle
""")

DTS = _src(
    _tabs(r"""
/dts-v1/;

/ {
    model = "Example board";
    compatible = "acme,board";

    cpus {
        #address-cells = <1>;
        cpu@0 {
            device_type = "cpu";
        };
    };

    &uart0 {
        status = "okay";
    };
};

&i2c1 {
    clock-frequency = <100000>;
    sensor: temp@48 {
        reg = <0x48>;
    };
};
""")
)

FOUNTAIN = _src(r"""
Title: Test

INT. KITCHEN - DAY

Alice enters.

EXT. GARDEN - NIGHT

Bob waits.

.FLASHBACK

int. lowercase - day

I/E. CAR - DAY

EST. CITY

..not a heading
""")

PLAIN = _src(r"""
[core]
	editor = vim
name = example
$HOME/bin is on the path
_private = 1
  indented = 2
9 starts with a digit
Section Two
-- dashes
value: 3
end
""")

# A language of one's own, configured with an extended pattern (and `!` lines) ...
MYLANG_XFUNCNAME = (
    "!^[ \t]*(proc|func)[ \t]+_\n"
    "!;[ \t]*$\n"
    "^[ \t]*((pub[ \t]+)?(proc|func)[ \t]+[A-Za-z_][A-Za-z_0-9]*[ \t]*\\(.*)$\n"
    "^(module[[:space:]]+[[:alnum:]_.]+)\n"
    '^[ \t]{0,2}(section[ \t]+"[^"]*")'
)
MYLANG = _src(r"""
module app.core  -- the core
import io;

section "setup"
  proc init(cfg)
    io.print("init");
  end

  pub func load(path, mode)
    if mode == 1
      return io.read(path);
    else
      return nil;
    end
  end

  proc _private_helper(x)
    x + 1
  end

  func forward(x);

section "run" -- main loop
proc main(args)
  var n = 0
  while n < 10
    n = n + 1
  end
  main_loop(n)
end

    section "too deep"
   section "three spaces"
module app.extra
func   spaced  (a)
  a
end
PROC upper(x)
  x
end
""")

# ... and one configured with a basic one (`funcname`), set after an extended one for the same
# driver that it must override (git keeps the last of the two).
OTHER_DECOY_XFUNCNAME = "^(.*)$"
OTHER_FUNCNAME = (
    "!^[ \t]*\\(sub\\|task\\)[ \t]\\+_\n"
    "^[ \t]*\\(\\(sub\\|task\\)[ \t]\\+[A-Za-z_][A-Za-z_0-9]*\\)\n"
    "^\\*\\{3\\}[ \t]*\\(.*\\)$\n"
    "^\\[\\([a-z.]*\\)\\]"
)
OTHER = _src(r"""
[build]
  jobs = 4
*** Targets
task compile
  run gcc -c main.c
  run gcc -o app main.o
task _internal
  run true
  sub helper
    echo hi
    echo there
[deploy.prod]
  host = example.org
** not three stars
  x
**** four stars
  y
sub   publish
  upload
task
  no name
taskforce x
  z
[Upper]
  w
task	tabbed
  end
""")

# name: (extension, expected driver, sample, at least this many declaration lines)
CASES = {
    "python": ("py", "python", PYTHON, 15),
    "golang": ("go", "golang", GOLANG, 12),
    "rust": ("rs", "rust", RUST, 18),
    "java": ("java", "java", JAVA, 12),
    "c": ("c", "cpp", C_SOURCE, 8),
    "c_header": ("h", "cpp", C_HEADER, 6),
    "cpp": ("cpp", "cpp", CPP, 12),
    "markdown": ("md", "markdown", MARKDOWN, 10),
    "javascript": ("js", "javascript", JAVASCRIPT, 14),
    "typescript": ("ts", "typescript", TYPESCRIPT, 15),
    "csharp": ("cs", "csharp", CSHARP, 8),
    "ruby": ("rb", "ruby", RUBY, 8),
    "perl": ("pl", "perl", PERL, 8),
    "php": ("php", "php", PHP, 10),
    "kotlin": ("kt", "kotlin", KOTLIN, 8),
    "bash": ("sh", "bash", BASH, 6),
    "css": ("css", "css", CSS, 8),
    "html": ("html", "html", HTML, 4),
    "tex": ("tex", "tex", TEX, 6),
    "objc": ("m", "objc", OBJC, 5),
    "fortran": ("f90", "fortran", FORTRAN, 6),
    "ada": ("adb", "ada", ADA, 5),
    "elixir": ("ex", "elixir", ELIXIR, 7),
    "pascal": ("pas", "pascal", PASCAL, 7),
    "scheme": ("scm", "scheme", SCHEME, 7),
    "matlab": ("mat", "matlab", MATLAB, 5),
    "bibtex": ("bib", "bibtex", BIBTEX, 4),
    "dts": ("dts", "dts", DTS, 5),
    "fountain": ("fountain", "fountain", FOUNTAIN, 6),
    "plain": ("txt", None, PLAIN, 6),  # no diff attribute: git's default rule
    "mylang": ("my", "mylang", MYLANG, 8),
    "other": ("oth", "other", OTHER, 7),
}
CONFIGURED = {"mylang", "other"}
SEEDS = range(20)

# User patterns on which POSIX regex semantics (git) and Python's re part ways, or nearly do.
# name: (pattern, extended, sample)
PROBES = {
    # ERE `+?` is `(x+)?` in POSIX (greedy), a lazy `+` in Python
    "lazy": ("^(task .+?)", True, b"task build all\n  step one\n  step two\n"),
    # the same in a basic pattern: GNU's \+\? is (b\+)\?, an optional run of b
    "brelazy": ("^\\(b\\+\\?c.*\\)", False, b"bbc d\n z\nc e\n w\n"),
    # POSIX takes the longest alternative, Python the first that matches
    "longest": ("^[ \t]*(sub|subroutine)", True, b"subroutine compute\n  x = 1\n  y = 2\n"),
    # GNU's \` is the start of the line git matches, Python's \A the start of the whole file
    "bufstart": ("\\`(def .*)", True, b"x = 1\ndef f\n  y\n  z\n"),
    # GNU's \< is the start of a word only; Python's \b either end of one
    "wordstart": ("^(.*)\\<", True, b"foo bar\n  y\n  z\n"),
    # a non-ASCII literal (git config values are UTF-8 bytes, matched as bytes)
    "nonascii": ("^(\u00a7[ \t].*)$", True, "\u00a7 Einleitung\n text\n more\n".encode("utf-8")),
    # BRE: ^ is an anchor only at the start (or after \( ), elsewhere a literal
    "brecaret": ("^\\(x^2[ \t].*\\)", False, b"x^2 grows\n text\n more\n"),
    # BRE: $ is an anchor only at the end (or before \) ), elsewhere a literal
    "bredollar": ("^\\(US$[ \t].*\\)", False, b"US$ prices\n text\n more\n"),
    # and some that translate() should get right. (Left out: a back-reference to group 2 or
    # later, as in `^(([a-z]+)=\2)`, never matches in git at all: git asks glibc's regexec for
    # two match slots only, and glibc then fails such a pattern. Nothing proctor should copy.)
    "backref": ("^([a-z]+)=\\1", True, b"aa=aa\n x\nab=cd\n y\nxy=xy\n z\n"),
    "brackets": ("^([]a-z[]+:.*)$", True, b"]ab[: one\n x\nq: two\n y\n"),
    "classes": (
        "^([[:upper:]][[:alnum:]_]*[[:blank:]]*[[:punct:]].*)$",
        True,
        b"Foo_1 = bar\n x\nBar baz\n y\nQux: z\n w\n",
    ),
    "gnuescapes": ("^\\s*(\\w+\\s*=\\s*\\{)", True, b"  config = {\n  x\nother={\n  y\n"),
    "interval": ("^(#{2,3}[^#].*)$\n^(x{,2}y.*)", True, b"## two\n a\n#### four\n b\nxxy\n c\nxxxy\n d\n"),
    "brestar": ("^*\\(.*\\)", False, b"*foo\n bar\n baz\n"),
    "breinterval": ("^\\(a\\{2,3\\}[a-z]*\\)\n^\\(b\\+c.*\\)", False, b"aab\n x\nab\n y\nbbc d\n z\nc e\n w\n"),
}


def _long_lines() -> bytes:
    cut_in_spaces = "def spaces_at_the_cut(a," + " " * 70 + "b):"
    exactly_80 = "def exactly_eighty(" + "x" * (80 - len("def exactly_eighty(") - 2) + "):"
    eighty_one = "def eighty_one(" + "y" * (81 - len("def eighty_one(") - 2) + "):"
    indented = "    " * 3 + "async def deeply_indented_method_whose_group_starts_after_the_indentation(self, a, b):"
    lines = [
        "class VeryLongClassNameForTestingTruncation(BaseClassNumberOne, BaseClassNumberTwo, BaseThree):",
        "    x = 1",
        cut_in_spaces,
        "    y = 2",
        exactly_80,
        "    w = 4",
        eighty_one,
        "    v = 5",
        indented,
        "    u = 6",
    ]
    assert len(exactly_80) == 80 and len(eighty_one) == 81
    return ("\n".join(lines) + "\n").encode("utf-8")


SPECIAL = {
    # truncation at 80 bytes, then trailing whitespace trimmed
    "special/long.py": _long_lines(),
    "special/long.md": (
        "## " + "A heading that goes on and on " * 4 + "\ntext\n" + "# " + "b" * 77 + "   tail\nmore\n"
    ).encode(),
    "special/long.go": (
        "func (r *Receiver) AVeryLongMethodName(ctx context.Context, first, second int) "
        "(result int, err error) {\n\treturn 0, nil\n}\n"
    ).encode(),
    "special/long.txt": ("Default rule line " + "z" * 80 + "\n  indented\n" + "$" + "q" * 78 + " \t\n  x\n").encode(),
    # git prints a hunk header only up to its first byte that is not (complete) UTF-8
    "special/utf8.py": (
        "def caf\u00e9():\n    x\n"  # UTF-8, whole: kept
        + "def "
        + "u" * 75
        + "\u00e9\u00e9\u00e9(x):\n    y\n"  # the first é's two bytes are 80 and 81
    ).encode("utf-8")
    + b"def caf\xe9_latin1():\n    z\nclass Na\xefve:   \xe9\n    w\n",
    # trailing spaces and tabs, trimmed by git after the match
    "special/trailing.py": b"def f():   \n    x\nclass A: \t \n    y\n\tdef g(self):\t\n        z\n",
    "special/trailing.txt": b"Section one   \n  a\nSection two\t\t\n  b\n",
    "special/trailing.md": b"# Title   \ntext\n## Sub\t \t\nmore\n",
    "special/trailing.cpp": b"int main()    \n{\n  return 0;\n}\nlabel:   \n  x;\n",
    # form feed and vertical tab at the end of a declaration line (git's isspace() is ' ', \t, \n, \r)
    "special/ffvt.py": b"def f():\f\n    x\nclass B: \v\n    y\ndef g():  \f  \n    z\n",
    "special/ffvt.txt": b"Section\f\n  a\nChapter \v\n  b\n",
}

CRLF = {
    "crlf/sample.py": PYTHON.replace(b"\n", b"\r\n"),
    "crlf/sample.pl": PERL.replace(b"\n", b"\r\n"),
    "crlf/sample.cs": CSHARP.replace(b"\n", b"\r\n"),
    "crlf/sample.js": JAVASCRIPT.replace(b"\n", b"\r\n"),
    "crlf/sample.ts": TYPESCRIPT.replace(b"\n", b"\r\n"),
    "crlf/sample.c": C_SOURCE.replace(b"\n", b"\r\n"),
    "crlf/sample.java": JAVA.replace(b"\n", b"\r\n"),
    "crlf/sample.rs": RUST.replace(b"\n", b"\r\n"),
    "crlf/sample.md": MARKDOWN.replace(b"\n", b"\r\n"),
    "crlf/sample.txt": PLAIN.replace(b"\n", b"\r\n"),
    "crlf/sample.sh": BASH.replace(b"\n", b"\r\n"),
}

ATTRIBUTES = "".join(
    f"*.{ext} diff={driver}\n" for ext, driver, _, _ in CASES.values() if driver is not None
) + "".join(f"*.{name} diff={name}\n" for name in PROBES)


# -- asking git ----------------------------------------------------------------------------------

_HUNK = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@(?: (.*))?")


def _replaced(data: bytes, parity: int) -> bytes:
    """`data` with every line whose 0-based index has `parity` replaced by a line of its own
    (its line ending kept); only the old file is searched for headers, so what replaces a line
    does not matter, as long as it is unlike every old line (so each change is a hunk)."""
    parts = data.split(b"\n")
    for i in range(len(parts) - (1 if data.endswith(b"\n") else 0)):
        if i % 2 == parity:
            parts[i] = b"0 replaced %d" % i + (b"\r" if parts[i].endswith(b"\r") else b"")
    return b"\n".join(parts)


def _parse(out: bytes, found: dict[str, dict[int, set[bytes]]]) -> None:
    path = None
    for line in out.split(b"\n"):
        if line.startswith(b"diff --git "):
            path = line.split(b" ")[2][2:].decode()  # "a/<path>": no spaces in these paths
            continue
        if line.startswith(b"@@ "):
            m = _HUNK.fullmatch(line)
            assert m and path, line
            start, count = int(m.group(1)), m.group(2)
            first = start + 1 if count is not None and int(count) == 0 else start
            found.setdefault(path, {}).setdefault(first, set()).add(m.group(3) or b"")


class Oracle:
    def __init__(self, root: str, files: dict[str, bytes]) -> None:
        self.root = root
        self.files = files
        self.found: dict[str, dict[int, set[bytes]]] = {}  # path: {first old line of a hunk: {header}}
        self.drivers: dict[str, str | None] = {}
        self.config: dict[str, tuple[str, bool]] = {}


def _path(name: str, ext: str, seed: int | None = None) -> str:
    return f"{name}/sample.{ext}" if seed is None else f"{name}/shuffle{seed:02d}.{ext}"


def _shuffled(data: bytes, seed: int) -> bytes:
    lines = data.split(b"\n")[:-1]
    random.Random(seed).shuffle(lines)
    return b"\n".join(lines) + b"\n"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> Oracle:
    root = str(tmp_path_factory.mktemp("declarations-oracle"))
    files: dict[str, bytes] = {}
    for name, (ext, _, data, _) in CASES.items():
        files[_path(name, ext)] = data
        for seed in SEEDS:
            files[_path(name, ext, seed)] = _shuffled(data, seed)
    for name, (_, _, data) in PROBES.items():
        files[f"probe/sample.{name}"] = data
    files.update(SPECIAL)
    files.update(CRLF)

    _git(root, "init", "-q", "-b", "main")
    for language in ("javascript", "typescript"):
        _git(root, "config", f"diff.{language}.xfuncname", PROCTOR_OWN[language][0])
    _git(root, "config", "diff.mylang.xfuncname", MYLANG_XFUNCNAME)
    _git(root, "config", "diff.other.xfuncname", OTHER_DECOY_XFUNCNAME)
    _git(root, "config", "diff.other.funcname", OTHER_FUNCNAME)
    for name, (pattern, extended, _) in PROBES.items():
        _git(root, "config", f"diff.{name}.{'xfuncname' if extended else 'funcname'}", pattern)
    with open(os.path.join(root, ".gitattributes"), "w") as handle:
        handle.write(ATTRIBUTES)
    for path, data in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "wb") as handle:
            handle.write(data)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "samples")

    result = Oracle(root, files)
    for parity in (0, 1):
        for path, data in files.items():
            with open(os.path.join(root, path), "wb") as handle:
                handle.write(_replaced(data, parity))
        out = _git(
            root,
            "-c",
            "diff.interHunkContext=0",
            "-c",
            "diff.noprefix=false",
            "diff",
            "-U0",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
        )
        _parse(out, result.found)

    # proctor's own reading of the checkout: the drivers from git's attributes, the patterns
    # from git's config, under the same isolation git ran with
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        reader = declarations.Reader(root)
        result.drivers = reader.drivers(sorted(files))
        result.config = read_config(root)
    return result


# -- comparing -----------------------------------------------------------------------------------


def _rules(oracle: Oracle, path: str) -> Rules:
    driver = oracle.drivers[path]
    if driver in PROCTOR_OWN:
        # git was given proctor's own pattern through its config; proctor reads its table
        rules = configured({}, driver)
        assert rules.source == "proctor"
        return rules
    return configured(oracle.config, driver)


def _git_part(rules: Rules, data: bytes) -> tuple[dict[int, bytes], dict[int, bytes]]:
    """(Rules.headers(data) without the lines proctor adds on top of git's patterns (EXTRA:
    Go's top-level var/const/type, a documented addition), those added lines)."""
    heads = rules.headers(data)
    if rules.driver in declarations.EXTRA and rules.source != "config":
        text, icase = BUILTIN[rules.driver]
        plain = Rules(None, text, True, icase).headers(data)
        extra = {k: v for k, v in heads.items() if k not in plain}
        return {k: v for k, v in heads.items() if k in plain}, extra
    return heads, {}


def _mismatches(
    path: str, data: bytes, heads: dict[int, bytes], found: dict[int, set[bytes]]
) -> list[tuple[str, int, str, str]]:
    """Every hunk whose header git and proctor disagree on: (path, the hunk's first old line,
    git's header and the line it likely came from, proctor's and the line it came from)."""
    lines = data.split(b"\n")
    keys = sorted(heads)
    out = []
    for first, got in sorted(found.items()):
        at = bisect.bisect_right(keys, first - 2) - 1  # the nearest declaration at/above line first-1
        want = heads[keys[at]] if at >= 0 else b""
        for header in sorted(got):
            if header == want:
                continue
            gits = next((i for i in range(first - 2, -1, -1) if header and header in lines[i]), None)
            out.append(
                (
                    path,
                    first,
                    f"git {header!r}" + (f" (line {gits + 1}: {lines[gits]!r})" if gits is not None else ""),
                    f"proctor {want!r}" + (f" (line {keys[at] + 1}: {lines[keys[at]]!r})" if at >= 0 else ""),
                )
            )
    return out


def _check(
    oracle: Oracle, path: str, rules: Rules | None = None, data: bytes | None = None
) -> list[tuple[str, int, str, str]]:
    data = oracle.files[path] if data is None else data
    rules = rules or _rules(oracle, path)
    heads, extra = _git_part(rules, data)
    for k in extra:  # what proctor adds to git's lines is only ever Go's top-level var/const/type
        assert re.match(rb"(var|const|type)([ \t(]|\r?$)", data.split(b"\n")[k]), (path, k + 1)
    return _mismatches(path, data, heads, oracle.found.get(path, {}))


def _report(problems: list[tuple[str, int, str, str]], limit: int = 200) -> str:
    """The mismatches, one line per (file, git's header, proctor's header) with its hunks."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for path, first, gits, proctors in problems:
        groups.setdefault((path, gits, proctors), []).append(first)
    shown = [
        f"{path}: hunks at old line(s) {','.join(map(str, firsts))}: {gits}, {proctors}"
        for (path, gits, proctors), firsts in list(groups.items())[:limit]
    ]
    more = f"\n... and {len(groups) - limit} more" if len(groups) > limit else ""
    return f"{len(problems)} hunk header(s) differ from git's:\n" + "\n".join(shown) + more


# -- the tests -----------------------------------------------------------------------------------


def test_proctor_reads_the_drivers_and_patterns_git_uses(oracle):
    for name, (ext, driver, _, _) in CASES.items():
        assert oracle.drivers[_path(name, ext)] == driver, name
    assert oracle.config["mylang"] == (MYLANG_XFUNCNAME, True)
    assert oracle.config["other"] == (OTHER_FUNCNAME, False)  # the later funcname wins
    assert oracle.config["javascript"] == (PROCTOR_OWN["javascript"][0], True)
    for name, (pattern, extended, _) in PROBES.items():
        assert oracle.config[name] == (pattern, extended), name
    assert configured(oracle.config, None).source == "default"
    assert configured(oracle.config, "python").source == "builtin"
    assert configured(oracle.config, "mylang").source == "config"


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_hunk_header_is_gits(oracle, name):
    ext, driver, data, at_least = CASES[name]
    path = _path(name, ext)
    rules = _rules(oracle, path)
    assert rules.source == (
        "config"
        if name in CONFIGURED
        else "default"
        if driver is None
        else "proctor"
        if driver in PROCTOR_OWN
        else "builtin"
    )
    found = oracle.found.get(path, {})
    lines = data.count(b"\n")
    # the two diffs put (nearly) every line at the head of a hunk of its own
    assert len(found) >= 0.85 * lines, (len(found), lines)
    heads, _ = _git_part(rules, data)
    git_headers = {h for hs in found.values() for h in hs if h}
    # not vacuous: both sides see plenty of declarations
    assert len(heads) >= at_least, sorted(heads.values())
    assert len(git_headers) >= at_least - 1, sorted(git_headers)
    problems = _check(oracle, path, rules)
    assert not problems, _report(problems)


def test_go_extra_declarations_are_only_top_level_var_const_type(oracle):
    """proctor's Go rules add the top-level var/const/type lines git's pattern skips (a
    documented addition, not git's); the oracle comparison leaves exactly those out."""
    rules = _rules(oracle, "golang/sample.go")
    _, extra = _git_part(rules, GOLANG)
    assert sorted(GOLANG.split(b"\n")[k].split(b" ")[0] for k in extra) == [
        b"const",
        b"const",
        b"type",
        b"type",
        b"var",
        b"var",
    ]


@pytest.mark.parametrize("name", sorted(CASES))
def test_shuffled_lines_hunk_headers_are_gits(oracle, name):
    ext = CASES[name][0]
    problems: list[str] = []
    checked = 0
    for seed in SEEDS:
        path = _path(name, ext, seed)
        checked += len(oracle.found.get(path, {}))
        problems += _check(oracle, path)
    assert checked >= 0.8 * len(SEEDS) * CASES[name][2].count(b"\n")
    assert not problems, _report(problems)


# POSIX picks the longest of two alternatives matching at one place; Python's re the first.
# Only the text a header shows differs (which lines are declarations does not), and Python's
# re has no POSIX mode: a known limit, held here so a fix shows.
_LONGEST = pytest.mark.xfail(strict=True, reason="leftmost-longest alternation: header text only")


@pytest.mark.parametrize("name", [pytest.param(n, marks=_LONGEST) if n == "longest" else n for n in sorted(PROBES)])
def test_configured_pattern_edge_cases(oracle, name):
    """User patterns in POSIX's dialect (git's regcomp/regexec, glibc's) that Python's re reads
    differently unless translated with care; see the comment on each in PROBES."""
    path = f"probe/sample.{name}"
    rules = _rules(oracle, path)
    assert rules.source == "config"
    assert oracle.found.get(path), "git produced no hunks"
    problems = _check(oracle, path, rules)
    assert not problems, _report(problems)


def test_truncation_at_80_bytes(oracle):
    problems: list[str] = []
    git_headers: set[bytes] = set()
    for path in ("special/long.py", "special/long.md", "special/long.go", "special/long.txt"):
        git_headers |= {h for hs in oracle.found[path].values() for h in hs}
        problems += _check(oracle, path)
    assert max(len(h) for h in git_headers) == 80  # truncation happened ...
    assert b"def spaces_at_the_cut(a," in git_headers  # ... and trailing blanks after it went
    assert not problems, _report(problems)


def test_header_stops_before_bytes_that_are_not_utf8(oracle):
    """git cuts the hunk header line it prints at the first byte sequence that is not complete
    UTF-8 (diff.c's sane_truncate_line): a character split by the 80-byte cut, or a Latin-1 byte."""
    assert oracle.found["special/utf8.py"]
    problems = _check(oracle, "special/utf8.py")
    assert not problems, _report(problems)


def test_trailing_spaces_and_tabs_are_trimmed(oracle):
    problems: list[str] = []
    for path in ("special/trailing.py", "special/trailing.txt", "special/trailing.md", "special/trailing.cpp"):
        assert oracle.found[path]
        problems += _check(oracle, path)
    assert not problems, _report(problems)


def test_trailing_form_feed_and_vertical_tab_are_kept(oracle):
    """git trims a header with its own isspace(), which is only ' ', \\t, \\n and \\r: a \\f or
    \\v at the end of a declaration line stays in the header git prints."""
    problems: list[str] = []
    for path in ("special/ffvt.py", "special/ffvt.txt"):
        assert oracle.found[path]
        problems += _check(oracle, path)
    assert not problems, _report(problems)


def test_crlf_lines_match_as_git_matches_them(oracle):
    """git strips a line's \\r\\n before it matches the line: Rules.headers on the file's bytes
    as they are (CRLF) must find what git finds."""
    problems: list[str] = []
    for path in sorted(CRLF):
        assert oracle.found[path]
        problems += _check(oracle, path)
    assert not problems, _report(problems)


def test_crlf_files_read_through_declarations(oracle):
    """declarations() turns CRLF into LF before it asks Rules.headers: read that way, a CRLF
    file's declaration lines are git's, and so are its hunk headers."""
    problems: list[str] = []
    for path in sorted(CRLF):
        data = oracle.files[path]
        rules = _rules(oracle, path)
        normalized = data.replace(b"\r\n", b"\n")
        problems += _check(oracle, path, rules, normalized)
        heads, extra = _git_part(rules, normalized)
        assert [d.line for d in declarations.declarations(data, rules)] == sorted(k + 1 for k in {**heads, **extra})
    assert not problems, _report(problems)
