package dev.compute.sample;

import dev.compute.memory.DeviceOutOfMemoryException;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.http.converter.HttpMessageNotReadableException;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;

/**
 * Errors of the REST API as RFC 9457 problem details, each with a message a caller can act on. Spring MVC's own
 * errors (404 for an unknown path, 405, 415, ...) are problem details too, from Spring Boot's handler
 * ({@code spring.mvc.problemdetails.enabled}); this one comes first for the API's controllers, so that an unreadable
 * body gets the message below rather than Spring's.
 */
@RestControllerAdvice(assignableTypes = {VectorController.class, LoadController.class})
@Order(Ordered.HIGHEST_PRECEDENCE)
public class ApiExceptionHandler {

    @ExceptionHandler(IllegalArgumentException.class)
    ProblemDetail badRequest(IllegalArgumentException e) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, e.getMessage());
    }

    @ExceptionHandler(VectorStore.VectorNotFoundException.class)
    ProblemDetail notFound(VectorStore.VectorNotFoundException e) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.NOT_FOUND, e.getMessage());
    }

    // 413, not 429: the limit is on what the service keeps, not on how often it is asked, so sending the same
    // request again cannot succeed until vectors are deleted; 429 would invite clients and gateways to retry it.
    @ExceptionHandler(VectorStore.VectorLimitExceededException.class)
    ProblemDetail limitExceeded(VectorStore.VectorLimitExceededException e) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.CONTENT_TOO_LARGE, e.getMessage());
    }

    // The service is shutting down (a put under way when its graceful shutdown ran out, or without one): try again later.
    @ExceptionHandler(VectorStore.StoreClosedException.class)
    ProblemDetail closed(VectorStore.StoreClosedException e) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.SERVICE_UNAVAILABLE, e.getMessage());
    }

    // Busy, not broken: the same request is taken once one running ends, so 503 and when to try again.
    @ExceptionHandler(HeavyRequestLimit.BusyException.class)
    ResponseEntity<ProblemDetail> busy(HeavyRequestLimit.BusyException e) {
        return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE)
                .header(HttpHeaders.RETRY_AFTER, Long.toString(e.retryAfterSeconds()))
                .body(ProblemDetail.forStatusAndDetail(HttpStatus.SERVICE_UNAVAILABLE, e.getMessage()));
    }

    // The device is full even after the pool released its cache: the request may succeed later, or smaller.
    @ExceptionHandler(DeviceOutOfMemoryException.class)
    ProblemDetail outOfMemory(DeviceOutOfMemoryException e) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.INSUFFICIENT_STORAGE, e.getMessage());
    }

    @ExceptionHandler(HttpMessageNotReadableException.class)
    ProblemDetail unreadable(HttpMessageNotReadableException e) {
        String takes = "(numbers in arrays, such as {\"alpha\": 2, \"x\": [1, 2, 3]})";
        if (e.getCause() == null) {
            // no body to read (none, or JSON's null): Spring's own message would name the handler method's signature
            return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, "the request body is missing: this operation takes JSON " + takes);
        }
        String cause = e.getMostSpecificCause().getMessage();
        return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, "the request body is not the JSON this operation takes " + takes
                + ": " + (cause != null ? firstLine(cause) : e.getMessage()));
    }

    private static String firstLine(String message) {
        int end = message.indexOf('\n');
        return end < 0 ? message : message.substring(0, end);
    }
}
