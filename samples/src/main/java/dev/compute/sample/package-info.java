/**
 * The sample service: a REST API for vector math on posted arrays and on named vectors kept in compute memory
 * between requests, and a load generator that makes the pool move.
 */
@NullMarked
package dev.compute.sample;

import org.jspecify.annotations.NullMarked;
