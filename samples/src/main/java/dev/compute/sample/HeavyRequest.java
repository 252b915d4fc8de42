package dev.compute.sample;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a handler method whose request or answer carries a whole vector (up to 128 MiB of FLOAT64 on the heap, more
 * while its JSON is read or written): at most {@code sample.heavy-requests.max-concurrent} of them run at once
 * ({@link HeavyRequestLimit}).
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
public @interface HeavyRequest {}
