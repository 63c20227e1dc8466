// The .mesh language (see LANGUAGE.md). grammar/Scanner.cpp and
// grammar/DirectParser.cpp are a hand-written copy of these rules, the parser
// every source without errors takes; ANTLR's parser generated from this file
// reports the errors. Change both together: DirectParserTest and the fuzz
// target fuzz_parse fail where they disagree.
//
// Expressions are written as loops over
// precedence levels rather than left recursion, so long operator chains give
// flat parse trees and the parser's native stack depth grows only with bracket
// nesting (which TokenFilter bounds).
//
// Newlines end statements. TokenFilter removes the newlines that cannot end a
// statement (inside brackets and record braces, after an operator or comma,
// before `else`) before the parser sees them, so this grammar only meets
// NEWLINE where a statement may end.
grammar Mesh;

program : sep* (statement (sep+ statement)*)? sep* EOF ;
sep : NEWLINE | ';' ;
block : '{' sep* (statement (sep+ statement)*)? sep* '}' ;

statement
  : importStmt
  | letStmt
  | fnDecl
  | layerDecl
  | modelDecl
  | clusterDecl
  | scheduleDecl
  | ifStmt
  | forStmt
  | whileStmt
  | returnStmt
  | breakStmt
  | continueStmt
  | assignStmt
  | exprStmt
  ;

importStmt : 'import' (dottedName | STRING) ('as' name)? ;
dottedName : name ('.' name)* ;
letStmt : kw=('let' | 'var') name '=' expr ;
fnDecl : 'fn' name '(' paramList? ')' ('=' expr | block) ;
layerDecl : 'layer' name '(' paramList? ')' block ;
modelDecl : 'model' name '(' paramList? ')' block ;
clusterDecl : 'cluster' name ('(' paramList? ')')? block ;
scheduleDecl : 'schedule' name block ;
paramList : param (',' param)* ','? ;
param : name ('=' expr)? ;
ifStmt : 'if' expr block ('else' (ifStmt | block))? ;
forStmt : 'for' name 'in' expr block ;
whileStmt : 'while' expr block ;
returnStmt : 'return' expr? ;
breakStmt : 'break' ;
continueStmt : 'continue' ;
assignStmt : postfixExpr op=('=' | '+=' | '-=' | '*=' | '/=') expr ;
exprStmt : expr ;

expr : orExpr ;
orExpr : andExpr ('or' andExpr)* ;
andExpr : notExpr ('and' notExpr)* ;
notExpr : (nots+='not')* compareExpr ;
compareExpr : rangeExpr (op=('==' | '!=' | '<' | '<=' | '>' | '>=') rangeExpr)? ;
rangeExpr : addExpr ('..' addExpr)? ;
addExpr : mulExpr (ops+=('+' | '-') mulExpr)* ;
mulExpr : unaryExpr (ops+=('*' | '/' | '//' | '%') unaryExpr)* ;
unaryExpr : (signs+=('-' | '+'))* powerExpr ;
// `**` is right-associative and binds tighter than a leading minus (-2**2 == -4);
// the transformer folds the operands from the right.
powerExpr : postfixExpr ('**' powerOperand)* ;
powerOperand : (signs+=('-' | '+'))* postfixExpr ;

postfixExpr : primary postfix* ;
postfix
  : '(' argList? ')'             # callSuffix
  | '[' expr (',' expr)* ','? ']' # indexSuffix
  | '.' name                     # fieldSuffix
  ;
argList : arg (',' arg)* ','? ;
arg : (name '=')? expr ;

primary
  : INT                                        # intLiteral
  | FLOAT                                      # floatLiteral
  | QUANTITY                                   # quantityLiteral
  | STRING                                     # stringLiteral
  | 'true'                                     # trueLiteral
  | 'false'                                    # falseLiteral
  | 'none'                                     # noneLiteral
  | 'auto'                                     # autoLiteral
  | name                                       # nameRef
  | '(' expr ')'                               # parenExpr
  | '[' (expr (',' expr)* ','?)? ']'           # listLiteral
  | '{' (recordField (',' recordField)* ','?)? '}' # recordLiteral
  ;
recordField : (name | STRING) ':' expr ;

// Declaration words are keywords only where a declaration starts, so `model`,
// `layer`, `cluster` and `schedule` stay usable as ordinary names.
name : IDENT | 'model' | 'layer' | 'cluster' | 'schedule' ;

QUANTITY : (DIGITS | DECIMAL) UNIT ('/s')? ;
FLOAT : DECIMAL ;
INT : DIGITS ;
STRING : '"' (ESCAPE | ~["\\\r\n])* '"' ;
// A string missing its closing quote, up to the end of the line: one token, so
// the rest of the line is not read as code and reported again.
UNTERMINATED_STRING : '"' (ESCAPE | ~["\\\r\n])* ;
IDENT : [A-Za-z_] [A-Za-z0-9_]* ;
NEWLINE : '\r'? '\n' ;
COMMENT : '#' ~[\r\n]* -> skip ;
WS : [ \t]+ -> skip ;
// Line continuation: a backslash at the end of a line joins it with the next.
CONTINUATION : '\\' '\r'? '\n' -> skip ;
// Anything else becomes one error token, reported once by the parser.
UNKNOWN_CHAR : . ;

fragment DIGITS : [0-9] ('_'? [0-9])* ;
fragment DECIMAL
  : DIGITS '.' DIGITS EXPONENT?
  | DIGITS EXPONENT
  ;
fragment EXPONENT : [eE] [+-]? DIGITS ;
fragment ESCAPE : '\\' . ;
fragment UNIT
  : 'B' | 'KB' | 'MB' | 'GB' | 'TB' | 'PB' | 'KiB' | 'MiB' | 'GiB' | 'TiB'
  | 'b' | 'Kb' | 'Mb' | 'Gb' | 'Tb'
  | 's' | 'ms' | 'us' | 'ns'
  | 'FLOP' | 'KFLOP' | 'MFLOP' | 'GFLOP' | 'TFLOP' | 'PFLOP'
  | 'FLOPS' | 'KFLOPS' | 'MFLOPS' | 'GFLOPS' | 'TFLOPS' | 'PFLOPS'
  ;
