/**
 * The trace replayer: replays recorded allocation traces through the caching pool and reports what it
 * reserved against what was live, the smallest device in which the trace fits, backend calls and speed.
 */
@NullMarked
package dev.compute.benchmarks.replay;

import org.jspecify.annotations.NullMarked;
