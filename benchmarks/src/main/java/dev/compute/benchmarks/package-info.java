/** The benchmarks' entry point: one runnable jar, one subcommand per benchmark. */
@NullMarked
package dev.compute.benchmarks;

import org.jspecify.annotations.NullMarked;
