/**
 * The CPU backend: host memory through the FFM API (Linux's {@code posix_memalign}, {@code mmap},
 * {@code mprotect}, {@code mlock}), the default that works wherever the JVM runs on Linux. Every location is
 * one memory here: the host's.
 */
@NullMarked
package dev.compute.memory.cpu;

import org.jspecify.annotations.NullMarked;
