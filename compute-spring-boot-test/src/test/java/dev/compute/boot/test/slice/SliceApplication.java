package dev.compute.boot.test.slice;

import org.springframework.boot.autoconfigure.SpringBootApplication;

/** An application, as {@link ComputeMemoryTestTests} finds one: it scans this package and auto-configures all it can. */
@SpringBootApplication
class SliceApplication {}
